// The LM head's weight gradient alone (issue 12, runtime/cuda/head_weight_grad_cutlass.hpp):
// dW[V,C] (+)= dlogits[N,V]^T X[N,C] in fp32 at GPT-2 124M's chunk shape (4096 positions, 50304
// padded vocabulary, 768 wide), "=" (the first chunk) and "+=" (the other three), by cuBLASLt as
// the engine calls it (its pins included) and by the CUTLASS kernel in each of its tiles. Prints
// per variant the median and minimum microseconds, TFLOP/s, the error against float64 on
// sampled rows of dW, whether a second call gives the same bits, and the largest difference from
// cuBLASLt's result.
//
//   head_weight_grad_bench [--warmup 5] [--reps 30] [--json FILE]
//
// "+=" calls start from the same dW (copied back in, outside the timed span). Exits 1 where a
// variant does not repeat its bits or misses the float64 tolerance.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_args.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "dtype.hpp"
#include "event_timing.hpp"
#include "head_weight_grad_cutlass.hpp"
#include "matmul_cublaslt.hpp"
#include "railyard/splitmix64.hpp"

using railyard::cuda::bf16;
using railyard::cuda::DeviceBuffer;
using json = nlohmann::json;
using Cutlass = railyard::cuda::CutlassHeadWeightGrad;

namespace {

constexpr int kRows = 4096, kVocab = 50304, kDim = 768;
constexpr int kSampleEvery = 797;  // dW rows checked against float64: 64 of 50304
constexpr double kTol = 1e-5;      // fp32 sums of 4096 bf16 products, relative to the largest
constexpr const char* kUsage =
    "usage: head_weight_grad_bench [--warmup 5] [--reps 30] [--json FILE]\n";

std::vector<float> uniform_values(size_t n, float scale, uint64_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    x = scale * (float(railyard::splitmix64_next(seed) >> 40) / float(1 << 23) - 1.0f);
  }
  return v;
}

// The operands on the device; dy and x rounded to bf16, the host keeps the rounded values.
struct Operands {
  std::vector<float> dy, x, init;
  DeviceBuffer d_dy{size_t(kRows) * kVocab * sizeof(bf16)},
      d_x{size_t(kRows) * kDim * sizeof(bf16)};
  DeviceBuffer init_dw{size_t(kVocab) * kDim * sizeof(float)};
  DeviceBuffer dw{size_t(kVocab) * kDim * sizeof(float)};
  Operands() {
    dy = uniform_values(size_t(kRows) * kVocab, 1.0f, 1);
    x = uniform_values(size_t(kRows) * kDim, 1.0f, 2);
    init = uniform_values(size_t(kVocab) * kDim, 4.0f, 3);
    upload_bf16(d_dy, dy);
    upload_bf16(d_x, x);
    RY_CUDA(cudaMemcpy(init_dw.as<void>(), init.data(), init.size() * sizeof(float),
                       cudaMemcpyHostToDevice));
  }
  static void upload_bf16(DeviceBuffer& d, std::vector<float>& v) {
    std::vector<bf16> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      h[i] = bf16(v[i]);
      v[i] = float(h[i]);
    }
    RY_CUDA(cudaMemcpy(d.as<void>(), h.data(), h.size() * sizeof(bf16), cudaMemcpyHostToDevice));
  }
  void reset(cudaStream_t s) const {
    RY_CUDA(cudaMemcpyAsync(dw.as<void>(), init_dw.as<void>(), size_t(kVocab) * kDim * 4,
                            cudaMemcpyDeviceToDevice, s));
  }
  std::vector<float> result() const {
    std::vector<float> h(size_t(kVocab) * kDim);
    RY_CUDA(cudaDeviceSynchronize());
    RY_CUDA(cudaMemcpy(h.data(), dw.as<void>(), h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
};

// dY^T X in float64 on the sampled rows of dW (row v of dW at (v / kSampleEvery) * kDim):
// computed once, shared by every variant.
std::vector<double> reference_rows(const Operands& op) {
  std::vector<double> ref;
  for (int v = 0; v < kVocab; v += kSampleEvery) {
    std::vector<double> row(kDim, 0.0);
    for (int n = 0; n < kRows; ++n) {
      const double g = op.dy[size_t(n) * kVocab + v];
      const float* xr = &op.x[size_t(n) * kDim];
      for (int c = 0; c < kDim; ++c) row[c] += g * xr[c];
    }
    ref.insert(ref.end(), row.begin(), row.end());
  }
  return ref;
}

// Largest |dW - float64| over the sampled rows, relative to the largest |float64| value there.
double f64_error(const Operands& op, const std::vector<double>& ref, const std::vector<float>& dw,
                 bool accumulate) {
  double worst = 0, largest = 0;
  for (int v = 0, j = 0; v < kVocab; v += kSampleEvery, ++j) {
    for (int c = 0; c < kDim; ++c) {
      const size_t i = size_t(v) * kDim + c;
      const double r = ref[size_t(j) * kDim + c] + (accumulate ? op.init[i] : 0.0);
      worst = std::max(worst, std::fabs(double(dw[i]) - r));
      largest = std::max(largest, std::fabs(r));
    }
  }
  return worst / std::max(largest, 1e-30);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

// The CUTLASS kernel of each tile, built once for both "=" and "+=".
using Kernels = std::vector<std::pair<Cutlass::Tile, std::unique_ptr<Cutlass>>>;

struct Variant {
  std::string name;
  bool accumulate;
  std::function<void(cudaStream_t)> run;
};

struct Row {
  railyard::bench::CallTimes t;
  double err = 0, vs_cublas = 0;
  bool same = false;
};

Row measure(const Operands& op, const std::vector<double>& ref, const Variant& v,
            const std::vector<float>* cublas, const railyard::bench::TimingOptions& o,
            cudaStream_t s) {
  Row r;
  auto call = [&](cudaStream_t st) {
    if (v.accumulate) op.reset(st);
    v.run(st);
  };
  call(s);
  const std::vector<float> first = op.result();
  call(s);
  r.same = op.result() == first;
  r.err = f64_error(op, ref, first, v.accumulate);
  r.vs_cublas = cublas ? max_diff(first, *cublas) : 0.0;
  // The reset copy stays outside the timed span: it runs before each timed call's events.
  for (int i = 0; i < o.warmup; ++i) call(s);
  std::vector<double> us;
  railyard::bench::Events ev(2);
  for (int i = 0; i < o.reps; ++i) {
    if (v.accumulate) op.reset(s);
    RY_CUDA(cudaEventRecord(ev[0], s));
    v.run(s);
    RY_CUDA(cudaEventRecord(ev[1], s));
    RY_CUDA(cudaEventSynchronize(ev[1]));
    float ms = 0;
    RY_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    us.push_back(ms * 1e3);
  }
  std::sort(us.begin(), us.end());
  r.t = {us[us.size() / 2], us.front()};
  return r;
}

std::vector<Variant> variants(const Operands& op, railyard::cuda::Matmul& mm, Kernels& keep) {
  std::vector<Variant> out;
  float* dw = op.dw.as<float>();
  const bf16* dy = op.d_dy.as<bf16>();
  const bf16* x = op.d_x.as<bf16>();
  for (Cutlass::Tile t : {Cutlass::Tile::kPingpong128x128, Cutlass::Tile::kCooperative256x128,
                          Cutlass::Tile::kCooperative128x256}) {
    keep.push_back({t, std::make_unique<Cutlass>(t)});
  }
  for (bool acc : {false, true}) {
    out.push_back({std::string("cublaslt (engine's call) ") + (acc ? "+=" : "="), acc,
                   [&mm, dw, dy, x, acc](cudaStream_t s) {
                     mm.linear_backward_weight(dw, dy, x, kRows, kDim, kVocab, CUDA_R_16BF, acc, s);
                   }});
    for (const auto& [t, kernel] : keep) {
      Cutlass* k = kernel.get();
      const std::string engine = t == Cutlass::kEngineTile ? " (engine)" : "";
      out.push_back({std::string(Cutlass::name(t)) + engine + (acc ? " +=" : " ="), acc,
                     [k, dw, dy, x, acc](cudaStream_t s) {
                       k->run(dw, dy, x, kRows, kDim, kVocab, acc, s);
                     }});
    }
  }
  return out;
}

int run(const railyard::bench::TimingOptions& o) {
  int device = 0;
  RY_CUDA(cudaGetDevice(&device));
  if (!Cutlass::supports(device)) {
    std::printf("head_weight_grad_bench: the CUTLASS kernel needs compute capability 9.0\n");
    return 77;
  }
  Operands op;
  railyard::cuda::Matmul mm;
  Kernels keep;
  cudaStream_t s = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double flops = 2.0 * kRows * double(kVocab) * kDim;
  std::printf("head weight gradient %d x %d (+)= %d positions, fp32 dW; float64 on %d rows\n",
              kVocab, kDim, kRows, (kVocab + kSampleEvery - 1) / kSampleEvery);
  std::printf("%-66s %9s %9s %7s %9s %9s %5s\n", "variant", "median us", "min us", "TFLOP/s",
              "err f64", "vs cublas", "same");
  json rows = json::array();
  bool ok = true;
  std::vector<float> cublas[2];  // cuBLASLt's "=" and "+=" results, the first variants
  const std::vector<double> f64 = reference_rows(op);
  for (const Variant& v : variants(op, mm, keep)) {
    std::vector<float>& first = cublas[v.accumulate ? 1 : 0];
    const Row r = measure(op, f64, v, first.empty() ? nullptr : &first, o, s);
    if (first.empty()) first = op.result();
    const bool pass = r.same && r.err <= kTol;
    ok = ok && pass;
    std::printf("%-66s %9.1f %9.1f %7.0f %9.2e %9.2e %5s%s\n", v.name.c_str(), r.t.median_us,
                r.t.min_us, flops / r.t.median_us / 1e6, r.err, r.vs_cublas, r.same ? "yes" : "NO",
                pass ? "" : "  FAILED");
    rows.push_back({{"variant", v.name},
                    {"accumulate", v.accumulate},
                    {"median_us", r.t.median_us},
                    {"min_us", r.t.min_us},
                    {"rel_err_f64", r.err},
                    {"max_diff_vs_cublaslt", r.vs_cublas},
                    {"same_bits", r.same}});
  }
  RY_CUDA(cudaStreamDestroy(s));
  if (!o.json.empty()) {
    std::ofstream(o.json) << json{{"bench", "head_weight_grad_bench"},
                                  {"rows", kRows},
                                  {"vocab_padded", kVocab},
                                  {"dim", kDim},
                                  {"variants", rows}}
                                 .dump(2)
                          << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(railyard::bench::parse_timing(argc, argv, kUsage));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "head_weight_grad_bench: %s\n", e.what());
    return 2;
  }
}
