// The wgmma attention backward prototype (attention_backward_wgmma.hpp) beside the engine's cuDNN
// backward (issue 12, bench/NOTES.md). Small shape (B=1 H=2 T=256): both against a float64
// CPU attention computed from the same bf16 inputs; full shape (B=16 H=12 T=1024, the step's):
// the prototype against cuDNN, both timed. The prototype runs on its own statistics (a slow fp32
// reference LSE kernel) with O from cuDNN's forward; the largest difference between cuDNN's
// saved statistics and that LSE tells whether cuDNN's are the natural-log log-sum-exp of the
// scaled scores. Same bits twice for the prototype. Exit code 1 if a check fails.
//
//   attention_backward_bench [--reps 30] [--warmup 5] [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_backward_wgmma.hpp"
#include "attention_cudnn.hpp"
#include "bench_args.hpp"
#include "cuda_check.hpp"
#include "event_timing.hpp"
#include "gpu_check.hpp"

using namespace railyard;
using cuda::bf16;
using gpu_check::DevArray;
using json = nlohmann::json;

namespace {

constexpr const char* kUsage =
    "usage: attention_backward_bench [--reps 30] [--warmup 5] [--json FILE]\n";
constexpr int kHd = 64;
// Relative L2 error allowed in each of dQ, dK, dV: the outputs are bf16 (2^-9 relative
// rounding) and both kernels round P and dS to bf16 before their products, ~0.5% in all;
// a wrong mask, scale or transpose is an O(1) error.
constexpr double kTol = 2e-2;

// The device arrays of one shape: inputs, cuDNN's forward and backward, the prototype's twice.
struct Run {
  cuda::AttentionShape s;
  DevArray<bf16> qkv, dout, out, dqkv_cudnn, dqkv_own, dqkv_again, dqkv_own1, dqkv_again1;
  DevArray<float> stats, lse, d;
  cuda::CudnnAttention att;
  cuda::DeviceBuffer workspace;
  cudaStream_t stream = nullptr;
  explicit Run(const cuda::AttentionShape& shape)
      : s(shape),
        qkv(3 * s.head_elems()),
        dout(s.head_elems()),
        out(s.head_elems()),
        dqkv_cudnn(3 * s.head_elems()),
        dqkv_own(3 * s.head_elems()),
        dqkv_again(3 * s.head_elems()),
        dqkv_own1(3 * s.head_elems()),
        dqkv_again1(3 * s.head_elems()),
        stats(size_t(s.B) * s.H * s.T),
        lse(stats.n),
        d(stats.n) {
    const size_t ws = att.prepare(s);
    workspace = cuda::DeviceBuffer(ws);
    att.set_workspace(workspace.as<void>(), ws);
    RY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Run() { cudaStreamDestroy(stream); }
  bench::AttnBwdShape own_shape() const { return {s.B, s.T, s.H}; }
  void cudnn_backward() {
    att.backward(dqkv_cudnn.ptr(), dout.ptr(), out.ptr(), stats.ptr(), qkv.ptr(), s, stream);
  }
  void own_backward(bf16* dqkv, bench::AttnBwdKernels which = bench::AttnBwdKernels::kBoth,
                    int warpgroups = 2) {
    bench::attention_backward_wgmma(dqkv, qkv.ptr(), dout.ptr(), lse.ptr(), d.ptr(), own_shape(),
                                    stream, which, warpgroups);
  }
  // The prototype's variants: warpgroups per CTA, and where its first and second run write.
  struct Own {
    std::string name;
    int warpgroups;
    DevArray<bf16>* first;
    DevArray<bf16>* again;
  };
  std::vector<Own> variants() {
    return {{"wgmma 2wg", 2, &dqkv_own, &dqkv_again}, {"wgmma 1wg", 1, &dqkv_own1, &dqkv_again1}};
  }
  // cuDNN forward and backward, the reference LSE and D, each variant of the prototype twice
  // (outputs poisoned).
  void compute_all() {
    dqkv_cudnn.poison();
    for (const Own& v : variants()) {
      v.first->poison();
      v.again->poison();
    }
    // The uploads and poisons ran on the legacy stream, which `stream` does not wait for.
    RY_CUDA(cudaDeviceSynchronize());
    att.forward(out.ptr(), stats.ptr(), qkv.ptr(), s, stream);
    cudnn_backward();
    bench::attention_lse_reference(lse.ptr(), qkv.ptr(), own_shape(), stream);
    bench::attention_dot_do_o(d.ptr(), out.ptr(), dout.ptr(), own_shape(), stream);
    for (const Own& v : variants()) {
      own_backward(v.first->ptr(), bench::AttnBwdKernels::kBoth, v.warpgroups);
      own_backward(v.again->ptr(), bench::AttnBwdKernels::kBoth, v.warpgroups);
    }
    RY_CUDA(cudaStreamSynchronize(stream));
  }
};

// Part `which` (0 Q, 1 K, 2 V) of a [B, T, 3, H, 64] array.
std::vector<double> part(const std::vector<double>& x, const cuda::AttentionShape& s, int which) {
  std::vector<double> p;
  p.reserve(s.head_elems());
  const size_t row = size_t(s.H) * kHd;
  for (size_t bt = 0; bt < size_t(s.B) * s.T; ++bt) {
    const double* src = x.data() + (bt * 3 + which) * row;
    p.insert(p.end(), src, src + row);
  }
  return p;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(a[i] - b[i]);
    if (!(d <= m)) m = d;  // a NaN shows
  }
  return m;
}

// Causal attention in float64 from the bf16 inputs: O [B, T, H*64], LSE [B, H, T] (natural log
// of the scaled scores), dQKV [B, T, 3, H, 64].
struct Reference {
  std::vector<double> out, lse, dqkv;
};

// One (b, h): the forward rows, then the backward from the probabilities kept per row.
void reference_head(const std::vector<double>& qkv, const std::vector<double>& dout,
                    const cuda::AttentionShape& s, int b, int h, Reference& r) {
  const double scale = 1.0 / std::sqrt(double(kHd));
  const size_t qs = 3 * size_t(s.H) * kHd, os = size_t(s.H) * kHd;
  auto at = [&](int t, int which) { return (size_t(b) * s.T + t) * qs + (which * s.H + h) * kHd; };
  auto orow = [&](int t) { return (size_t(b) * s.T + t) * os + h * kHd; };
  std::vector<double> p(s.T), dp(s.T);
  for (int t = 0; t < s.T; ++t) {
    double m = -INFINITY, sum = 0, dsum = 0;
    for (int k = 0; k <= t; ++k) {
      double x = 0;
      for (int e = 0; e < kHd; ++e) x += qkv[at(t, 0) + e] * qkv[at(k, 1) + e];
      p[k] = x * scale;
      m = std::max(m, p[k]);
    }
    for (int k = 0; k <= t; ++k) sum += std::exp(p[k] - m);
    const double lse = m + std::log(sum);
    r.lse[(size_t(b) * s.H + h) * s.T + t] = lse;
    for (int k = 0; k <= t; ++k) {
      p[k] = std::exp(p[k] - lse);
      dp[k] = 0;
      for (int e = 0; e < kHd; ++e) {
        r.out[orow(t) + e] += p[k] * qkv[at(k, 2) + e];
        dp[k] += dout[orow(t) + e] * qkv[at(k, 2) + e];
      }
      dsum += p[k] * dp[k];  // D = dout . out
    }
    for (int k = 0; k <= t; ++k) {
      const double ds = p[k] * (dp[k] - dsum) * scale;  // d(loss)/d(q.k)
      for (int e = 0; e < kHd; ++e) {
        r.dqkv[at(t, 0) + e] += ds * qkv[at(k, 1) + e];
        r.dqkv[at(k, 1) + e] += ds * qkv[at(t, 0) + e];
        r.dqkv[at(k, 2) + e] += p[k] * dout[orow(t) + e];
      }
    }
  }
}

Reference reference(const std::vector<double>& qkv, const std::vector<double>& dout,
                    const cuda::AttentionShape& s) {
  Reference r{std::vector<double>(s.head_elems()), std::vector<double>(size_t(s.B) * s.H * s.T),
              std::vector<double>(3 * s.head_elems())};
  for (int b = 0; b < s.B; ++b) {
    for (int h = 0; h < s.H; ++h) reference_head(qkv, dout, s, b, h, r);
  }
  return r;
}

constexpr const char* kParts[] = {"dQ", "dK", "dV"};

// Where a part of [B, T, H, 64] differs most from its reference (a first hint where a failing
// kernel goes wrong: a row on the diagonal, one head, one feature).
void print_worst(const std::string& what, const std::vector<double>& out,
                 const std::vector<double>& ref, const cuda::AttentionShape& s) {
  size_t worst = 0;
  double diff = -1;
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    const double e = std::fabs(out[i] - ref[i]);
    if (!(e <= diff)) {
      diff = e;
      worst = i;
      if (std::isnan(e)) break;
    }
  }
  const size_t e = worst % kHd, h = worst / kHd % s.H, t = worst / (size_t(kHd) * s.H) % s.T;
  const size_t b = worst / (size_t(kHd) * s.H * s.T);
  std::printf("info %s worst at b=%zu t=%zu h=%zu d=%zu: %.5g (want %.5g)\n", what.c_str(), b, t, h,
              e, out[worst], ref[worst]);
}

// ||out - ref|| / ||ref|| (L2), as gpu_check::Report measures it.
double rel_l2(const std::vector<double>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// report.check, with the relative error also into j[what] (for the JSON).
void check(gpu_check::Report& report, json& j, const std::string& what,
           const std::vector<double>& out, const std::vector<double>& ref, double tol) {
  j[what] = rel_l2(out, ref);
  report.check(what, out, ref, tol);
}

// The small shape: cuDNN and the prototype against float64.
json run_small(gpu_check::Report& report) {
  const cuda::AttentionShape s{1, 256, 2, kHd};
  std::printf("== small shape B=%d T=%d H=%d hd=%d: against float64\n", s.B, s.T, s.H, s.hd);
  Run run(s);
  std::mt19937_64 rng(7);
  const std::vector<double> qkv = run.qkv.upload(gpu_check::random_vec(rng, run.qkv.n));
  const std::vector<double> dout = run.dout.upload(gpu_check::random_vec(rng, run.dout.n));
  run.compute_all();
  const Reference ref = reference(qkv, dout, s);
  json j;
  check(report, j, "cuDNN forward out vs float64", run.out.download(), ref.out, kTol);
  const std::vector<double> lse = run.lse.download(), stats = run.stats.download();
  j["own_lse_vs_float64_max_abs"] = max_abs_diff(lse, ref.lse);
  j["cudnn_stats_vs_float64_max_abs"] = max_abs_diff(stats, ref.lse);
  std::printf("info cuDNN stats vs float64 LSE max_abs %.3e; own LSE vs float64 max_abs %.3e\n",
              j["cudnn_stats_vs_float64_max_abs"].get<double>(),
              j["own_lse_vs_float64_max_abs"].get<double>());
  report.check("own reference LSE vs float64", lse, ref.lse, 1e-5);
  const std::vector<double> dc = run.dqkv_cudnn.download();
  for (int w = 0; w < 3; ++w) {
    check(report, j, std::string("cuDNN backward ") + kParts[w] + " vs float64", part(dc, s, w),
          part(ref.dqkv, s, w), kTol);
  }
  for (const Run::Own& v : run.variants()) {
    const std::vector<double> dn = v.first->download();
    for (int w = 0; w < 3; ++w) {
      const std::string n = v.name + " backward " + kParts[w];
      check(report, j, n + " vs float64", part(dn, s, w), part(ref.dqkv, s, w), kTol);
      print_worst(n, part(dn, s, w), part(ref.dqkv, s, w), s);
    }
    report.same_bits(v.name + " backward twice (small)", v.again->download(), dn);
  }
  return j;
}

// The full shape's checks: the prototype against cuDNN, twice the same bits; the statistics.
json check_full(gpu_check::Report& report, Run& run) {
  const cuda::AttentionShape& s = run.s;
  json j;
  const std::vector<double> lse = run.lse.download(), stats = run.stats.download();
  j["cudnn_stats_vs_own_lse_max_abs"] = max_abs_diff(stats, lse);
  std::printf(
      "info cuDNN stats vs own LSE max_abs %.3e (natural-log LSE of the scaled scores "
      "if ~1e-6)\n",
      j["cudnn_stats_vs_own_lse_max_abs"].get<double>());
  const std::vector<double> dc = run.dqkv_cudnn.download();
  for (const Run::Own& v : run.variants()) {
    const std::vector<double> dn = v.first->download();
    for (int w = 0; w < 3; ++w) {
      const std::string n = v.name + " backward " + kParts[w];
      const std::vector<double> mine = part(dn, s, w), theirs = part(dc, s, w);
      check(report, j, n + " vs cuDNN", mine, theirs, kTol);
      print_worst(n, mine, theirs, s);
    }
    report.same_bits(v.name + " backward twice (full)", v.again->download(), dn);
  }
  // The prototype on cuDNN's statistics instead (information: the engine would pass those).
  RY_CUDA(cudaMemcpyAsync(run.lse.ptr(), run.stats.ptr(), run.stats.n * sizeof(float),
                          cudaMemcpyDeviceToDevice, run.stream));
  run.own_backward(run.dqkv_again.ptr());
  const std::vector<double> with_stats = run.dqkv_again.download();
  for (int w = 0; w < 3; ++w) {
    const double rel = rel_l2(part(with_stats, s, w), part(dc, s, w));
    j[std::string("wgmma on cuDNN stats ") + kParts[w] + " vs cuDNN"] = rel;
    std::printf("info wgmma backward on cuDNN's stats %s vs cuDNN rel_err %.3e\n", kParts[w], rel);
  }
  bench::attention_lse_reference(run.lse.ptr(), run.qkv.ptr(), run.own_shape(), run.stream);
  return j;
}

// The median time of cuDNN's backward and of the prototype's variants and pieces (a table).
json time_table(Run& run, const bench::TimingOptions& o) {
  const cuda::AttentionShape& s = run.s;
  json j;
  // One causal product: 2*T*T*64 flop a head dense, half of it under the mask.
  const double flop = double(s.B) * s.H * double(s.T) * s.T * kHd;
  struct Timed {
    const char* name;
    // Causal products: of the backward's 5 (S, dP, dV, dK, dQ) the call delivers, and that it
    // runs (the dQ kernel computes S and dP again: 7 in all).
    int useful, executed;
    std::function<void(cudaStream_t)> call;
  };
  const bench::AttnBwdShape os = run.own_shape();
  constexpr bench::AttnBwdKernels kBoth = bench::AttnBwdKernels::kBoth;
  const Timed timed[] = {
      {"cuDNN backward (engine plan)", 5, 5, [&](cudaStream_t) { run.cudnn_backward(); }},
      {"wgmma 2wg dK/dV + dQ kernels", 5, 7,
       [&](cudaStream_t) { run.own_backward(run.dqkv_own.ptr()); }},
      {"wgmma 2wg dK/dV kernel alone", 2, 4,
       [&](cudaStream_t) { run.own_backward(run.dqkv_own.ptr(), bench::AttnBwdKernels::kDkDv); }},
      {"wgmma 2wg dQ kernel alone", 1, 3,
       [&](cudaStream_t) { run.own_backward(run.dqkv_own.ptr(), bench::AttnBwdKernels::kDq); }},
      {"wgmma 1wg dK/dV + dQ kernels", 5, 7,
       [&](cudaStream_t) { run.own_backward(run.dqkv_own1.ptr(), kBoth, 1); }},
      {"wgmma 1wg dK/dV kernel alone", 2, 4,
       [&](cudaStream_t) {
         run.own_backward(run.dqkv_own1.ptr(), bench::AttnBwdKernels::kDkDv, 1);
       }},
      {"wgmma 1wg dQ kernel alone", 1, 3,
       [&](cudaStream_t) { run.own_backward(run.dqkv_own1.ptr(), bench::AttnBwdKernels::kDq, 1); }},
      {"D = rowsum(dO o O) kernel", 0, 0,
       [&](cudaStream_t st) {
         bench::attention_dot_do_o(run.d.ptr(), run.out.ptr(), run.dout.ptr(), os, st);
       }},
      {"wgmma 2wg total (D + kernels)", 5, 7,
       [&](cudaStream_t st) {
         bench::attention_dot_do_o(run.d.ptr(), run.out.ptr(), run.dout.ptr(), os, st);
         run.own_backward(run.dqkv_own.ptr());
       }},
  };
  std::printf("| %-30s | %9s | %14s | %15s |\n", "call", "median us", "useful TFLOP/s",
              "executed TFLOP/s");
  for (const Timed& t : timed) {
    const bench::CallTimes ct = bench::time_calls(t.call, run.stream, o.warmup, o.reps);
    const double per_product = flop / (ct.median_us * 1e-6) / 1e12;
    const double useful = t.useful * per_product, executed = t.executed * per_product;
    std::printf("| %-30s | %9.1f | %14.1f | %15.1f |\n", t.name, ct.median_us, useful, executed);
    j["times"][t.name] = {{"median_us", ct.median_us},
                          {"min_us", ct.min_us},
                          {"useful_tflops", useful},
                          {"executed_tflops", executed}};
  }
  j["flop_per_causal_product"] = flop;
  return j;
}

// The full shape: checks against cuDNN, then the times.
json run_full(gpu_check::Report& report, const bench::TimingOptions& o) {
  const cuda::AttentionShape s{16, 1024, 12, kHd};
  std::printf("== full shape B=%d T=%d H=%d hd=%d: against cuDNN, timed\n", s.B, s.T, s.H, s.hd);
  Run run(s);
  std::mt19937_64 rng(11);
  run.qkv.upload(gpu_check::random_vec(rng, run.qkv.n));
  run.dout.upload(gpu_check::random_vec(rng, run.dout.n));
  run.compute_all();
  json j = check_full(report, run);
  const json t = time_table(run, o);
  j["times"] = t["times"];
  j["flop_per_causal_product"] = t["flop_per_causal_product"];
  return j;
}

}  // namespace

int main(int argc, char** argv) try {
  const bench::TimingOptions o = bench::parse_timing(argc, argv, kUsage);
  gpu_check::Report report;
  json j;
  // Host only: runs before the skip where there is no GPU.
  const size_t mismatches = bench::attention_backward_layout_mismatches();
  std::printf("%-4s %-44s %zu mismatch(es)\n", mismatches == 0 ? "ok" : "FAIL",
              "wgmma operand layouts (host)", mismatches);
  if (mismatches != 0) report.fail("wgmma operand layouts");
  gpu_check::skip_without_gpu();
  j["small"] = run_small(report);
  j["full"] = run_full(report, o);
  j["reps"] = o.reps;
  j["warmup"] = o.warmup;
  const int rc = report.exit_code();
  j["passed"] = rc == 0;
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << j.dump(2) << "\n";
    if (!f) throw std::runtime_error("cannot write " + o.json);
  }
  return rc;
} catch (const std::exception& e) {
  std::fprintf(stderr, "attention_backward_bench: %s\n", e.what());
  return 2;
}
