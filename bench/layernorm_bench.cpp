// The step's memory-bound LayerNorm and embedding kernels alone (issue 12, bench/NOTES.md):
// LayerNorm (runtime/cuda/layernorm_kernels.cu) at GPT-2's rows, 16384 x 768 bf16: the forward
// (one input: the residual add is in the products' epilogues), its output rows 776 apart (the
// ones column), and the backward in the three ways the step calls it (dx added to the residual
// gradient with the projection bias's column sums: 23 layers' ln1/ln2; dx overwritten: ln_f; no
// column sums: layer 0's ln1); and
// the embedding backward (runtime/cuda/embedding_kernels.cu) at B 16, T 1024, vocabulary 50257,
// on uniform tokens (what bench/gpu_bench.sh trains on) and on tokens drawn as words are (a few
// ids repeated hundreds of times). The LayerNorm backward before
// (bench/layernorm_bench_reference.cu, commit 2877015) is timed beside each first pass the engine
// can run (LayerNormBackwardKernel: staged, lean; each with its second pass, and once more alone
// as the step runs it, second pass deferred; lean's bits are its own, shown against staged's as
// information) (the forward, the same kernel as then less its residual add, alone), the
// embedding beside its kernels before issue 12 (CUB's sort on the GPU; the engine's order comes
// from the host's counting sort, token_order.hpp, timed on the host); round by round after --warmup
// rounds, each run from the same inputs; median and minimum microseconds and the rate of the bytes
// each must move. LayerNorm outputs: the largest error against float64 over the largest value (bf16
// outputs within 1e-2, fp32 sums within 1e-3), the same bits when run twice, and (information) the
// same bits as the kernel before. The embedding's outputs by a warp group per run must equal the
// reference's bit for bit; by segments (other sums), dwte within 1e-5 of float64, the same bits
// twice, dwpe the reference's bits.
// Any failure fails the run (exit 1).
//
//   layernorm_bench [--warmup 5] [--reps 30] [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "bench_args.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "embedding_kernels.hpp"
#include "fixed_order_sum.hpp"
#include "gemm_survey_kernels.hpp"
#include "layernorm_bench_reference.hpp"
#include "layernorm_float64.hpp"
#include "layernorm_kernels.hpp"
#include "token_order.hpp"

using railyard::cuda::DeviceBuffer;
using bf16 = __nv_bfloat16;
using json = nlohmann::json;
namespace rb = railyard::bench;
namespace rc = railyard::cuda;

namespace {

constexpr const char* kUsage = "usage: layernorm_bench [--warmup 5] [--reps 30] [--json FILE]\n";
constexpr int kRows = 16384, kC = 768, kB = 16, kT = 1024, kVocab = 50257, kPaddedVocab = 50304;
// The step's row stride of the LayerNorm outputs: ones_column_row_stride(768)
// (ones_column_kernels.hpp).
constexpr int kLdOut = 832;

using Options = railyard::bench::TimingOptions;

// One way of computing the results: `reset` restores its inputs (outside the timed window),
// `run` is what is timed.
struct Contender {
  std::function<void()> reset, run;
};

// Microseconds of each contender's run, sorted, one run of each per round.
std::vector<std::vector<double>> time_rounds(const std::vector<Contender>& cs, const Options& o,
                                             cudaStream_t s) {
  cudaEvent_t start, stop;
  RY_CUDA(cudaEventCreate(&start));
  RY_CUDA(cudaEventCreate(&stop));
  std::vector<std::vector<double>> us(cs.size());
  for (int round = 0; round < o.warmup + o.reps; ++round) {
    for (size_t k = 0; k < cs.size(); ++k) {
      cs[k].reset();
      RY_CUDA(cudaEventRecord(start, s));
      cs[k].run();
      RY_CUDA(cudaEventRecord(stop, s));
      RY_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      RY_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (round >= o.warmup) us[k].push_back(ms * 1e3);
    }
  }
  RY_CUDA(cudaEventDestroy(start));
  RY_CUDA(cudaEventDestroy(stop));
  for (auto& v : us) std::sort(v.begin(), v.end());
  return us;
}

// A device copy of `src` into `dst` on the stream.
void copy(DeviceBuffer& dst, const DeviceBuffer& src, cudaStream_t s) {
  RY_CUDA(
      cudaMemcpyAsync(dst.as<void>(), src.as<void>(), src.bytes(), cudaMemcpyDeviceToDevice, s));
}

// Outputs of one contender against the reference's: every one the same bits, or not.
bool same_outputs(const std::vector<std::pair<const DeviceBuffer*, const DeviceBuffer*>>& pairs,
                  const std::vector<bool>& is_bf16, DeviceBuffer& scratch, cudaStream_t s) {
  bool same = true;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const size_t n = pairs[i].first->bytes() / (is_bf16[i] ? 2 : 4);
    rb::Comparison c = rb::compare(pairs[i].first->as<void>(), pairs[i].second->as<void>(), n,
                                   is_bf16[i], scratch.as<unsigned>(), s);
    same = same && c.same_bits;
  }
  return same;
}

// The table's lines and the JSON of one case: per contender its bytes and its check ("ref" for
// the reference, else what was checked, or "-").
json report(const std::string& name, const std::vector<std::string>& who,
            const std::vector<std::vector<double>>& us, const std::vector<double>& bytes,
            const std::vector<std::string>& checks) {
  json rows = json::array();
  for (size_t k = 0; k < us.size(); ++k) {
    const double median = us[k][us[k].size() / 2];
    std::printf("%-44s %-36s %9.1f %9.1f %8.3f  %s\n", name.c_str(), who[k].c_str(), median,
                us[k].front(), bytes[k] / (median * 1e-6) / 1e12, checks[k].c_str());
    rows.push_back({{"kernel", who[k]},
                    {"median_us", median},
                    {"min_us", us[k].front()},
                    {"bytes", bytes[k]},
                    {"gb_per_s", bytes[k] / (median * 1e-6) / 1e9}});
  }
  return {{"case", name}, {"runs", rows}};
}

// The LayerNorm backward's outputs: dx, dw, db, dsum and the scratch of its partials.
struct LayerNormOutputs {
  DeviceBuffer dx, dw, db, dsum, partials;
  explicit LayerNormOutputs(size_t nc)
      : dx(nc * 2),
        dw(kC * 4),
        db(kC * 4),
        dsum(kC * 4),
        partials(rc::layernorm_backward_partials(kRows, kC) * 4) {}
  // On the host, as float: dx, dw, db (, dsum).
  std::vector<std::vector<float>> host(bool sum) const {
    std::vector<std::vector<float>> h = {
        rb::download_floats(dx.as<void>(), size_t(kRows) * kC, true),
        rb::download_floats(dw.as<void>(), kC, false),
        rb::download_floats(db.as<void>(), kC, false)};
    if (sum) h.push_back(rb::download_floats(dsum.as<void>(), kC, false));  // else never written
    return h;
  }
};

// Bit-for-bit equality of two host copies of the same outputs.
bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

// One contender's checks: errors against float64 per output, the bits of a second run, the
// bits against the first contender (the kernel before, where a case has one); the table's text
// and the JSON.
struct Verdict {
  std::vector<double> errors;
  bool twice = false, has_before = true, as_before = false, ok = false;
  int as_staged = -1;  // (information) staged's bits: -1 not compared, 0 no, 1 yes
  std::string text() const {
    std::string t = "err64";
    char b[32];
    for (double e : errors) {
      std::snprintf(b, sizeof b, " %.1e", e);
      t += b;
    }
    t += std::string(", bits twice ") + (twice ? "yes" : "NO");
    if (has_before) t += std::string(", = before ") + (as_before ? "yes" : "no");
    if (as_staged >= 0) t += std::string(", = staged ") + (as_staged == 1 ? "yes" : "no");
    return t + (ok ? "" : "  FAILED");
  }
  json to_json() const {
    json j = {{"errors_vs_float64", errors}, {"same_bits_twice", twice}, {"ok", ok}};
    if (has_before) j["same_bits_as_before"] = as_before;
    if (as_staged >= 0) j["same_bits_as_staged"] = as_staged == 1;
    return j;
  }
};

// Errors within a bf16 rounding of the largest value (2^-8 of it) for bf16 outputs, 1e-3 of it
// for fp32 ones (sums of 16384 rows in another order than float64's).
bool within_tolerance(const std::vector<double>& errors, const std::vector<bool>& is_bf16) {
  bool ok = true;
  for (size_t i = 0; i < errors.size(); ++i) ok = ok && errors[i] <= (is_bf16[i] ? 1e-2 : 1e-3);
  return ok;
}

// The table's lines and the JSON of one case, a row per contender.
json report_verdicts(const std::string& name, const std::vector<std::string>& who,
                     const std::vector<std::vector<double>>& us, double bytes,
                     const std::vector<Verdict>& v) {
  std::vector<std::string> checks;
  for (const Verdict& x : v) checks.push_back(x.text());
  json r = report(name, who, us, std::vector<double>(who.size(), bytes), checks);
  for (size_t k = 0; k < v.size(); ++k) r["runs"][k]["check"] = v[k].to_json();
  return r;
}

// The bench's LayerNorm inputs: dy, x, w, b, the statistics of the forward on x, and dx0 (the
// residual gradient the backward adds to).
struct LayerNormInputs {
  DeviceBuffer dy, x, w, b, mean, rstd, dx0, out;
  LayerNormInputs(size_t nc, cudaStream_t s)
      : dy(nc * 2),
        x(nc * 2),
        w(kC * 2),
        b(kC * 2),
        mean(kRows * 4),
        rstd(kRows * 4),
        dx0(nc * 2),
        out(nc * 2) {
    rb::fill_uniform(dy.as<void>(), nc, true, 1e-2f, 11, s);
    rb::fill_uniform(x.as<void>(), nc, true, 2.0f, 12, s);
    rb::fill_uniform(w.as<void>(), kC, true, 1.0f, 13, s);
    rb::fill_uniform(b.as<void>(), kC, true, 0.1f, 14, s);
    rb::fill_uniform(dx0.as<void>(), nc, true, 1e-2f, 15, s);
    rc::layernorm_forward(out.as<bf16>(), mean.as<float>(), rstd.as<float>(), x.as<bf16>(),
                          w.as<bf16>(), b.as<bf16>(), kRows, kC, kC, s);
  }
};

// The float64 backward of the bench's inputs.
rb::BackwardFloat64 backward_float64(const LayerNormInputs& in, bool accumulate) {
  const size_t nc = size_t(kRows) * kC;
  const std::vector<float> dx0 = rb::download_floats(in.dx0.as<void>(), nc, true);
  return rb::layernorm_backward_float64(rb::download_floats(in.dy.as<void>(), nc, true),
                                        rb::download_floats(in.x.as<void>(), nc, true),
                                        rb::download_floats(in.w.as<void>(), kC, true),
                                        rb::download_floats(in.mean.as<void>(), kRows, false),
                                        rb::download_floats(in.rstd.as<void>(), kRows, false),
                                        accumulate ? &dx0 : nullptr, kRows, kC);
}

// Each contender's verdict: its last timed run's outputs (from dx0) against float64, the first
// contender's and (from the third on) the second's (the staged first pass), then run once more
// from dx0 for the bits. Each first pass rounds in its own order: staged's bits are information
// (lean's differ in some cases), float64 and the same bits twice decide.
std::vector<Verdict> backward_verdicts(const std::vector<Contender>& cs,
                                       const std::vector<LayerNormOutputs>& outs,
                                       const rb::BackwardFloat64& ref, bool sum) {
  const std::vector<bool> types = {true, false, false, false};
  std::vector<Verdict> v(cs.size());
  const auto before = outs[0].host(sum), staged = outs[1].host(sum);
  for (size_t k = 0; k < cs.size(); ++k) {
    const auto first = outs[k].host(sum);
    v[k].errors = {rb::relative_error(first[0], ref.dx, kRows, kC, kC),
                   rb::relative_error(first[1], ref.dw, 1, kC, kC),
                   rb::relative_error(first[2], ref.db, 1, kC, kC)};
    if (sum) v[k].errors.push_back(rb::relative_error(first[3], ref.dsum, 1, kC, kC));
    cs[k].reset();
    cs[k].run();
    v[k].twice = same_bits(outs[k].host(sum), first);
    v[k].as_before = same_bits(first, before);
    if (k >= 2) v[k].as_staged = same_bits(first, staged) ? 1 : 0;
    v[k].ok = v[k].twice && within_tolerance(v[k].errors, types);
  }
  return v;
}

// The first passes layernorm_backward can run (LayerNormBackwardKernel), their row names
// ("engine: " marks kLayerNormBackwardKernel's).
const std::vector<std::pair<rc::LayerNormBackwardKernel, std::string>>& backward_kernels() {
  using K = rc::LayerNormBackwardKernel;
  static const std::vector<std::pair<K, std::string>> ks = [] {
    std::vector<std::pair<K, std::string>> v = {{K::kStaged, "staged, 12 warps x 3 rows"},
                                                {K::kLean, "lean: w in registers, pairs"}};
    for (auto& [k, name] : v) {
      if (k == rc::kLayerNormBackwardKernel) name = "engine: " + name;
    }
    return v;
  }();
  return ks;
}

// LayerNorm backward of 16384 x 768 bf16 rows: the kernel before (2877015's register kernel and
// the engine's second pass) and each of layernorm_backward's first passes with its second pass.
json layernorm_case(bool accumulate, bool sum, const Options& o, cudaStream_t s, bool& all_ok) {
  const size_t nc = size_t(kRows) * kC, parts = sum ? 3 : 2;
  const LayerNormInputs in(nc, s);
  const auto& kernels = backward_kernels();
  std::vector<LayerNormOutputs> outs;
  for (size_t k = 0; k < 1 + kernels.size(); ++k) outs.emplace_back(nc);
  std::vector<Contender> cs;
  auto reset = [&](LayerNormOutputs* to) {
    return std::function<void()>([&in, s, to] { copy(to->dx, in.dx0, s); });
  };
  cs.push_back({reset(&outs[0]), [&] {
                  LayerNormOutputs& r = outs[0];
                  rc::ColumnSums c;
                  c.partials = r.partials.as<float>();
                  c.rows = rb::reference_layernorm_backward_first_pass(
                      r.dx.as<bf16>(), r.partials.as<float>(), in.dy.as<bf16>(), in.x.as<bf16>(),
                      in.w.as<bf16>(), in.mean.as<float>(), in.rstd.as<float>(), kRows, kC,
                      accumulate, sum, s);
                  c.cols = int(parts) * kC;
                  c.width = kC;
                  c.out[0] = r.dw.as<float>();
                  c.out[1] = r.db.as<float>();
                  c.out[2] = sum ? r.dsum.as<float>() : nullptr;
                  rc::sum_partial_columns(c, s);
                }});
  std::vector<std::string> who = {"before (2877015)"};
  for (size_t k = 0; k < kernels.size(); ++k) {
    LayerNormOutputs* e = &outs[1 + k];
    const rc::LayerNormBackwardKernel kernel = kernels[k].first;
    cs.push_back({reset(e), [&, e, kernel] {
                    rc::layernorm_backward<bf16>(
                        e->dx.as<bf16>(), e->dw.as<float>(), e->db.as<float>(),
                        sum ? e->dsum.as<float>() : nullptr, e->partials.as<float>(),
                        in.dy.as<bf16>(), in.x.as<bf16>(), in.w.as<bf16>(), in.mean.as<float>(),
                        in.rstd.as<float>(), kRows, kC, accumulate, false, s, nullptr, nullptr,
                        kernel);
                  }});
    who.push_back(kernels[k].second);
  }
  const auto us = time_rounds(cs, o, s);
  const auto verdicts = backward_verdicts(cs, outs, backward_float64(in, accumulate), sum);
  for (const Verdict& v : verdicts) all_ok = all_ok && v.ok;
  // Bytes each must move: dy, x, dx (read too with +=), mean and rstd, 132 rows of partials
  // written and read, the sums written.
  const double bytes = double(nc) * 2 * (accumulate ? 4 : 3) + kRows * 8.0 +
                       2.0 * 132 * parts * kC * 4 + parts * kC * 4.0;
  const std::string name = std::string("layernorm backward, dx ") + (accumulate ? "+=" : "=") +
                           (sum ? ", column sums" : ", no column sums");
  return report_verdicts(name, who, us, bytes, verdicts);
}

// The step's call (dx +=, column sums) with its second pass deferred, as the engine queues it:
// each first pass alone, as the step's timeline counts it. Timed only: the bits are the case
// above's.
json first_pass_case(const Options& o, cudaStream_t s) {
  const size_t nc = size_t(kRows) * kC;
  const LayerNormInputs in(nc, s);
  const auto& kernels = backward_kernels();
  std::vector<LayerNormOutputs> outs;
  for (size_t k = 0; k < kernels.size(); ++k) outs.emplace_back(nc);
  std::vector<Contender> cs;
  std::vector<std::string> who;
  for (size_t k = 0; k < kernels.size(); ++k) {
    LayerNormOutputs* e = &outs[k];
    const rc::LayerNormBackwardKernel kernel = kernels[k].first;
    cs.push_back({[&in, e, s] { copy(e->dx, in.dx0, s); },
                  [&, e, kernel] {
                    std::vector<rc::ColumnSums> deferred;
                    rc::layernorm_backward<bf16>(
                        e->dx.as<bf16>(), e->dw.as<float>(), e->db.as<float>(), e->dsum.as<float>(),
                        e->partials.as<float>(), in.dy.as<bf16>(), in.x.as<bf16>(), in.w.as<bf16>(),
                        in.mean.as<float>(), in.rstd.as<float>(), kRows, kC, true, false, s,
                        &deferred, nullptr, kernel);
                  }});
    who.push_back(kernels[k].second);
  }
  const auto us = time_rounds(cs, o, s);
  // dy, x, the old dx read, dx written, the statistics, 132 rows of partials written.
  const double bytes = double(nc) * 2 * 4 + kRows * 8.0 + 132.0 * 3 * kC * 4;
  return report("layernorm backward, dx +=, sums, first pass only", who, us,
                std::vector<double>(who.size(), bytes), std::vector<std::string>(who.size(), "-"));
}

// The LayerNorm forward's outputs: the normalised rows (776 apart, as the step stores them for
// the ones column), the statistics.
struct ForwardOutputs {
  DeviceBuffer out, mean, rstd;
  ForwardOutputs() : out(size_t(kRows) * kLdOut * 2), mean(kRows * 4), rstd(kRows * 4) {
    RY_CUDA(cudaMemset(out.as<void>(), 0, out.bytes()));  // columns past C: never written
  }
  std::vector<std::vector<float>> host() const {
    return {rb::download_floats(out.as<void>(), size_t(kRows) * kLdOut, true),
            rb::download_floats(mean.as<void>(), kRows, false),
            rb::download_floats(rstd.as<void>(), kRows, false)};
  }
};

// The engine's forward's verdict (from its last timed run, then once more for the bits). The
// forward has no kernel before to compare with: the one at 2877015 was this one with a residual
// add, which is now in the products' epilogues.
Verdict forward_verdict(const Contender& c, const ForwardOutputs& out,
                        const rb::ForwardFloat64& ref) {
  Verdict v;
  v.has_before = false;
  const auto first = out.host();
  v.errors = {rb::relative_error(first[0], ref.out, kRows, kC, kLdOut),
              rb::relative_error(first[1], ref.mean, 1, kRows, kRows),
              rb::relative_error(first[2], ref.rstd, 1, kRows, kRows)};
  c.run();
  v.twice = same_bits(out.host(), first);
  v.ok = v.twice && within_tolerance(v.errors, {true, false, false});
  return v;
}

// The engine's LayerNorm forward of 16384 x 768 bf16 rows, out at row stride 776 (the step's
// residual adds are in the products' epilogues), against float64.
json forward_case(const Options& o, cudaStream_t s, bool& all_ok) {
  const size_t nc = size_t(kRows) * kC;
  const LayerNormInputs in(nc, s);
  ForwardOutputs out;
  const Contender c = {[] {},
                       [&in, &out, s] {
                         rc::layernorm_forward(out.out.as<bf16>(), out.mean.as<float>(),
                                               out.rstd.as<float>(), in.x.as<bf16>(),
                                               in.w.as<bf16>(), in.b.as<bf16>(), kRows, kC, kLdOut,
                                               s);
                       }};
  const auto us = time_rounds({c}, o, s);
  const rb::ForwardFloat64 ref =
      rb::layernorm_forward_float64(rb::download_floats(in.x.as<void>(), nc, true),
                                    rb::download_floats(in.w.as<void>(), kC, true),
                                    rb::download_floats(in.b.as<void>(), kC, true), kRows, kC);
  const Verdict v = forward_verdict(c, out, ref);
  all_ok = all_ok && v.ok;
  // Bytes: x read, the normalised rows written, the statistics.
  const double bytes = 2.0 * nc * 2 + kRows * 8.0;
  return report_verdicts("layernorm forward (plain), out ld 776",
                         {"engine: packed, 1 row a warp, 8 warps"}, us, bytes, {v});
}

// GPT-2-like token ids: rank r (id r) drawn with weight 1 / (r + 1), so the commonest id fills
// about 9% of the batch, as the commonest words of English text do within a factor of two.
std::vector<int32_t> word_like_tokens(std::mt19937_64& rng) {
  std::vector<double> cdf(kVocab);
  double total = 0;
  for (int r = 0; r < kVocab; ++r) cdf[r] = total += 1.0 / (r + 1);
  std::uniform_real_distribution<double> u(0.0, total);
  std::vector<int32_t> t(size_t(kB) * kT);
  for (auto& id : t) {
    id = int32_t(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
    id = std::min(id, kVocab - 1);
  }
  return t;
}

// Median microseconds of the host's counting sort of the batch (TokenOrder: what the engine
// runs when it stages a batch, off the GPU's path).
double host_sort_us(const std::vector<int32_t>& tok, const Options& o, std::vector<uint32_t>& keys,
                    std::vector<uint32_t>& pos) {
  rc::TokenOrder order(kVocab);
  std::vector<double> us;
  for (int r = 0; r < o.warmup + o.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    order.sort(tok, keys.data(), pos.data());
    const auto t1 = std::chrono::steady_clock::now();
    if (r >= o.warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us.empty() ? 0.0 : us[us.size() / 2];
}

// dwte from zero in float64: per token, the sum of its rows of dout (bf16 on the device).
std::vector<double> wte_float64(const std::vector<int32_t>& tok, const DeviceBuffer& dout) {
  const std::vector<float> d = rb::download_floats(dout.as<void>(), tok.size() * kC, true);
  std::vector<double> w(size_t(kPaddedVocab) * kC, 0.0);
  for (size_t i = 0; i < tok.size(); ++i) {
    for (int k = 0; k < kC; ++k) w[size_t(tok[i]) * kC + k] += d[i * kC + k];
  }
  return w;
}

// The embedding backward's buffers: the inputs, the order from the host's sort, and per way
// (0: reference, 1: the engine's run per warp group, 2: segments) its outputs.
struct EmbeddingBuffers {
  static constexpr int N = kB * kT;
  static constexpr size_t kWte = size_t(kPaddedVocab) * kC, kWpe = size_t(kT) * kC;
  DeviceBuffer dout{size_t(N) * kC * 2}, tokens{N * 4}, keys{N * 4}, positions{N * 4},
      cmp{3 * sizeof(unsigned)}, ref_scratch{rb::reference_embedding_scratch_bytes(N, kVocab)},
      partials{rc::embedding_backward_scratch_bytes(kB, kT, kC)};
  DeviceBuffer wte[3] = {DeviceBuffer(kWte * 4), DeviceBuffer(kWte * 4), DeviceBuffer(kWte * 4)};
  DeviceBuffer wpe[3] = {DeviceBuffer(kWpe * 4), DeviceBuffer(kWpe * 4), DeviceBuffer(kWpe * 4)};
  void run(int way, bool acc, cudaStream_t s) {
    if (way == 0) {
      rb::reference_embedding_backward(wte[0].as<float>(), wpe[0].as<float>(),
                                       ref_scratch.as<void>(), dout.as<bf16>(),
                                       tokens.as<int32_t>(), kB, kT, kC, kVocab, acc, s);
      return;
    }
    rc::embedding_backward(
        wte[way].as<float>(), wpe[way].as<float>(), dout.as<bf16>(), keys.as<uint32_t>(),
        positions.as<uint32_t>(), partials.as<float>(), kB, kT, kC, acc, s,
        way == 1 ? rc::WteBackward::kRunPerWarpGroup : rc::WteBackward::kSegments);
  }
  bool same(int way, int as, cudaStream_t s) {
    return same_outputs({{&wte[way], &wte[as]}, {&wpe[way], &wpe[as]}}, {false, false}, cmp, s);
  }
  std::vector<float> host_wte(int way) const {
    return rb::download_floats(wte[way].as<void>(), kWte, false);
  }
};

// The segments' checks (from the timed runs' outputs: dwte from zero): dwte against float64,
// the same bits once more, dwpe the reference's bits.
std::string segments_check(EmbeddingBuffers& e, const std::vector<int32_t>& tok, cudaStream_t s,
                           bool& ok) {
  const std::vector<float> first = e.host_wte(2);
  const double err = rb::relative_error(first, wte_float64(tok, e.dout), kPaddedVocab, kC, kC);
  const bool wpe_same = same_outputs({{&e.wpe[2], &e.wpe[0]}}, {false}, e.cmp, s);
  RY_CUDA(cudaMemsetAsync(e.wte[2].as<void>(), 0, e.wte[2].bytes(), s));
  e.run(2, false, s);
  const std::vector<float> again = e.host_wte(2);
  const bool twice = std::memcmp(first.data(), again.data(), first.size() * 4) == 0;
  ok = twice && wpe_same && err <= 1e-5;
  char b[160];
  std::snprintf(b, sizeof b, "wte err64 %.1e, bits twice %s, wpe = ref %s%s", err,
                twice ? "yes" : "NO", wpe_same ? "yes" : "NO", ok ? "" : "  FAILED");
  return b;
}

// The embedding backward (dwte, dwpe) at B 16, T 1024, C 768, bf16: the reference (the GPU's
// sort, then its kernels), the engine's two ways (order from the host's sort, timed on the host
// and printed), the GPU's sort alone. The run per warp group must give the reference's bits (on
// the timed runs, dwte from zero and dwpe overwritten, and once more adding to random
// gradients); the segments (other sums) dwte within 1e-5 of float64 and the same bits twice.
json embedding_case(const std::string& name, const std::vector<int32_t>& tok, const Options& o,
                    cudaStream_t s, bool& all_ok) {
  const int N = EmbeddingBuffers::N;
  EmbeddingBuffers e;
  RY_CUDA(cudaMemcpy(e.tokens.as<void>(), tok.data(), N * 4, cudaMemcpyHostToDevice));
  std::vector<uint32_t> hkeys(N), hpos(N);
  const double host_us = host_sort_us(tok, o, hkeys, hpos);
  RY_CUDA(cudaMemcpy(e.keys.as<void>(), hkeys.data(), N * 4, cudaMemcpyHostToDevice));
  RY_CUDA(cudaMemcpy(e.positions.as<void>(), hpos.data(), N * 4, cudaMemcpyHostToDevice));
  rb::fill_uniform(e.dout.as<void>(), size_t(N) * kC, true, 1e-2f, 21, s);
  auto way = [&](int k) {
    return Contender{
        [&e, k, s] { RY_CUDA(cudaMemsetAsync(e.wte[k].as<void>(), 0, e.wte[k].bytes(), s)); },
        [&e, k, s] { e.run(k, false, s); }};
  };
  const std::vector<Contender> cs = {way(0),
                                     way(1),
                                     way(2),
                                     {[] {},
                                      [&] {
                                        rb::reference_embedding_sort(e.ref_scratch.as<void>(),
                                                                     e.tokens.as<int32_t>(), N,
                                                                     kVocab, s);
                                      }}};
  const auto us = time_rounds(cs, o, s);
  bool same = e.same(1, 0, s), seg_ok = false;
  const std::string seg = segments_check(e, tok, s, seg_ok);
  for (int k = 0; k < 2; ++k) {
    rb::fill_uniform(e.wte[k].as<void>(), EmbeddingBuffers::kWte, false, 1.0f, 22, s);
    rb::fill_uniform(e.wpe[k].as<void>(), EmbeddingBuffers::kWpe, false, 1.0f, 23, s);
    e.run(k, true, s);
  }
  same = e.same(1, 0, s) && same;
  all_ok = all_ok && same && seg_ok;
  const size_t distinct = std::set<int32_t>(tok.begin(), tok.end()).size();
  const double nc = double(N) * kC;
  const double bytes =
      2.0 * nc * 2 + 2.0 * distinct * kC * 4 + EmbeddingBuffers::kWpe * 4.0 + N * 4.0 * 6;
  std::printf("(%zu distinct tokens of %d; the engine's order: host counting sort %.1f us)\n",
              distinct, N, host_us);
  json r = report(name,
                  {"before issue 12 (GPU sort)", "engine before: run per warp group",
                   "segments of 8 + combine, wpe fused", "GPU sort alone (before)"},
                  us, {bytes, bytes, bytes, bytes},
                  {"ref", same ? "same bits" : "NOT THE SAME BITS", seg, "-"});
  r["same_bits"] = same;
  r["segments_ok"] = seg_ok;
  r["distinct_tokens"] = distinct;
  r["host_sort_us"] = host_us;
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = railyard::bench::parse_timing(argc, argv, kUsage);
  cudaStream_t s;
  RY_CUDA(cudaStreamCreate(&s));
  std::printf("%-44s %-36s %9s %9s %8s  %s\n", "case", "kernel", "median us", "min us", "TB/s",
              "check");
  bool all_ok = true;
  json out;
  out["warmup"] = o.warmup;
  out["reps"] = o.reps;
  std::printf(
      "(err64: largest error against float64 over the largest value; backward: dx dw db "
      "[dsum], forward: out mean rstd)\n");
  out["layernorm_forward"] = {forward_case(o, s, all_ok)};
  out["layernorm_backward"] = {layernorm_case(true, true, o, s, all_ok),
                               layernorm_case(false, true, o, s, all_ok),
                               layernorm_case(true, false, o, s, all_ok), first_pass_case(o, s)};
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int32_t> pick(0, kVocab - 1);
  std::vector<int32_t> uniform(size_t(kB) * kT);
  for (auto& t : uniform) t = pick(rng);
  out["embedding_backward"] = {
      embedding_case("embedding backward, uniform tokens", uniform, o, s, all_ok),
      embedding_case("embedding backward, word-like tokens", word_like_tokens(rng), o, s, all_ok)};
  out["checks_passed"] = all_ok;
  RY_CUDA(cudaStreamDestroy(s));
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << out.dump(2) << "\n";
    if (!f) throw std::runtime_error("cannot write " + o.json + ": check the directory");
  }
  if (!all_ok) {
    std::fprintf(stderr,
                 "layernorm_bench: a check failed (the table's last column): the engine's results "
                 "are not reproducible or not those of the reference\n");
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "layernorm_bench: %s\n", e.what());
  return 1;
}
