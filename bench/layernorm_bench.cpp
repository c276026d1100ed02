// The step's two memory-bound backward families alone (issue 12, bench/NOTES.md): LayerNorm
// backward (runtime/cuda/layernorm_kernels.cu) at GPT-2's rows, 16384 x 768 bf16, in the three
// ways the step calls it (dx added to the residual gradient with the projection bias's column
// sums: 23 layers' ln1/ln2; dx overwritten: ln_f; no column sums: layer 0's ln1), and the
// embedding backward (runtime/cuda/embedding_kernels.cu) at B 16, T 1024, vocabulary 50257, on
// uniform tokens (what bench/gpu_bench.sh trains on) and on tokens drawn as words are (a few ids
// repeated hundreds of times). Each is timed beside the engine's kernel before it changed
// (bench/layernorm_bench_reference.cu: LayerNorm before issue 12's second attempt, embedding
// before issue 12), round by round after --warmup rounds, each run from the same inputs; median
// and minimum microseconds and the rate of the bytes each must move. The embedding's outputs
// must equal the reference's bit for bit. The LayerNorm's column sums are added in another
// order than the reference's: its outputs must be the same bits when run twice, and close to
// the reference's (dx within a bf16 rounding, dw, db and the column sums within 1e-3 of their
// largest value); anything else fails the run (exit 1).
//
//   layernorm_bench [--warmup 5] [--reps 30] [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "embedding_kernels.hpp"
#include "fixed_order_sum.hpp"
#include "gemm_survey_kernels.hpp"
#include "layernorm_bench_reference.hpp"
#include "layernorm_kernels.hpp"

using railyard::cuda::DeviceBuffer;
using bf16 = __nv_bfloat16;
using json = nlohmann::json;
namespace rb = railyard::bench;
namespace rc = railyard::cuda;

namespace {

constexpr const char* kUsage = "usage: layernorm_bench [--warmup 5] [--reps 30] [--json FILE]\n";
constexpr int kRows = 16384, kC = 768, kB = 16, kT = 1024, kVocab = 50257, kPaddedVocab = 50304;

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
    std::printf("%-44s %-26s %9.1f %9.1f %8.3f  %s\n", name.c_str(), who[k].c_str(), median,
                us[k].front(), bytes[k] / (median * 1e-6) / 1e12, checks[k].c_str());
    rows.push_back({{"kernel", who[k]},
                    {"median_us", median},
                    {"min_us", us[k].front()},
                    {"bytes", bytes[k]},
                    {"gb_per_s", bytes[k] / (median * 1e-6) / 1e9}});
  }
  return {{"case", name}, {"runs", rows}};
}

// Largest |a - ref| over the largest |ref| of each pair (0 where ref is all zeros and a equals it).
std::vector<double> relative_differences(
    const std::vector<std::pair<const DeviceBuffer*, const DeviceBuffer*>>& pairs,
    const std::vector<bool>& is_bf16, DeviceBuffer& scratch, cudaStream_t s) {
  std::vector<double> out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const size_t n = pairs[i].first->bytes() / (is_bf16[i] ? 2 : 4);
    rb::Comparison c = rb::compare(pairs[i].first->as<void>(), pairs[i].second->as<void>(), n,
                                   is_bf16[i], scratch.as<unsigned>(), s);
    out.push_back(c.max_abs_diff == 0 ? 0.0 : c.max_abs_diff / c.max_abs_ref);
  }
  return out;
}

// The LayerNorm's outputs: dx, dw, db and (with column sums) dsum.
struct LayerNormOutputs {
  DeviceBuffer dx, dw, db, dsum, partials;
  explicit LayerNormOutputs(size_t nc)
      : dx(nc * 2),
        dw(kC * 4),
        db(kC * 4),
        dsum(kC * 4),
        partials(rc::layernorm_backward_partials(kRows, kC) * 4) {}
  std::vector<std::pair<const DeviceBuffer*, const DeviceBuffer*>> against(
      const LayerNormOutputs& o, bool sum) const {
    std::vector<std::pair<const DeviceBuffer*, const DeviceBuffer*>> p = {
        {&dx, &o.dx}, {&dw, &o.dw}, {&db, &o.db}};
    if (sum) p.push_back({&dsum, &o.dsum});  // without, dsum is never written
    return p;
  }
  void copy_from(const LayerNormOutputs& o, cudaStream_t s) {
    copy(dx, o.dx, s);
    copy(dw, o.dw, s);
    copy(db, o.db, s);
    copy(dsum, o.dsum, s);
  }
};

// LayerNorm backward of 16384 x 768 bf16 rows: the reference's first pass and the engine's second
// pass (sum_partial_columns) against the engine's layernorm_backward.
json layernorm_case(bool accumulate, bool sum, const Options& o, cudaStream_t s, bool& all_ok) {
  const size_t nc = size_t(kRows) * kC, parts = sum ? 3 : 2;
  DeviceBuffer dy(nc * 2), x(nc * 2), w(kC * 2), b(kC * 2), out(nc * 2), mean(kRows * 4),
      rstd(kRows * 4), dx0(nc * 2), scratch(3 * sizeof(unsigned));
  rb::fill_uniform(dy.as<void>(), nc, true, 1e-2f, 11, s);
  rb::fill_uniform(x.as<void>(), nc, true, 2.0f, 12, s);
  rb::fill_uniform(w.as<void>(), kC, true, 1.0f, 13, s);
  rb::fill_uniform(b.as<void>(), kC, true, 0.1f, 14, s);
  rb::fill_uniform(dx0.as<void>(), nc, true, 1e-2f, 15, s);
  rc::layernorm_forward(out.as<bf16>(), mean.as<float>(), rstd.as<float>(), x.as<bf16>(),
                        w.as<bf16>(), b.as<bf16>(), kRows, kC, kC, s);
  LayerNormOutputs ref(nc), eng(nc), first(nc);
  const int ref_blocks = std::min((kRows + 7) / 8, 396);  // the reference's partial rows
  auto run_ref = [&] {
    rb::reference_layernorm_backward_first_pass(
        ref.dx.as<bf16>(), ref.partials.as<float>(), dy.as<bf16>(), x.as<bf16>(), w.as<bf16>(),
        mean.as<float>(), rstd.as<float>(), kRows, kC, accumulate, sum, s);
    rc::ColumnSums cs;
    cs.partials = ref.partials.as<float>();
    cs.rows = ref_blocks;
    cs.cols = int(parts) * kC;
    cs.width = kC;
    cs.out[0] = ref.dw.as<float>();
    cs.out[1] = ref.db.as<float>();
    cs.out[2] = sum ? ref.dsum.as<float>() : nullptr;
    rc::sum_partial_columns(cs, s);
  };
  auto run_eng = [&] {
    rc::layernorm_backward(eng.dx.as<bf16>(), eng.dw.as<float>(), eng.db.as<float>(),
                           sum ? eng.dsum.as<float>() : nullptr, eng.partials.as<float>(),
                           dy.as<bf16>(), x.as<bf16>(), w.as<bf16>(), mean.as<float>(),
                           rstd.as<float>(), kRows, kC, accumulate, false, s);
  };
  const std::vector<Contender> cs = {{[&] { copy(ref.dx, dx0, s); }, run_ref},
                                     {[&] { copy(eng.dx, dx0, s); }, run_eng}};
  const auto us = time_rounds(cs, o, s);
  // The last round's results, each from dx0; the engine's once more from dx0: the same bits.
  first.copy_from(eng, s);
  copy(eng.dx, dx0, s);
  run_eng();
  const std::vector<bool> types = {true, false, false, false};
  const bool twice = same_outputs(eng.against(first, sum), types, scratch, s);
  const std::vector<double> rel = relative_differences(eng.against(ref, sum), types, scratch, s);
  bool close = rel[0] <= 1e-2;  // a bf16 rounding of the largest dx is 2^-8 of it
  for (size_t i = 1; i < rel.size(); ++i) close = close && rel[i] <= 1e-3;
  all_ok = all_ok && twice && close;
  char check[96];
  std::snprintf(check, sizeof check, "bits twice %s, vs ref dx %.1e sums %.1e %s",
                twice ? "yes" : "NO", rel[0], *std::max_element(rel.begin() + 1, rel.end()),
                close ? "ok" : "NOT CLOSE");
  // Bytes each must move: dy, x, dx (read too with +=), mean and rstd, its partials written and
  // read, the sums written.
  auto bytes = [&](int partial_rows) {
    return double(nc) * 2 * (accumulate ? 4 : 3) + kRows * 8.0 +
           2.0 * partial_rows * parts * kC * 4 + parts * kC * 4.0;
  };
  const int eng_rows = 132;  // the engine's blocks at these rows: one per multiprocessor
  const std::string name = std::string("layernorm backward, dx ") + (accumulate ? "+=" : "=") +
                           (sum ? ", column sums" : ", no column sums");
  json r = report(name, {"issue 12 first (289da3f)", "engine"}, us,
                  {bytes(ref_blocks), bytes(eng_rows)}, {"ref", check});
  r["same_bits_twice"] = twice;
  r["relative_difference_to_reference"] = rel;  // dx, dw, db (, dsum)
  r["close_to_reference"] = close;
  return r;
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

// The embedding backward (sort, dwte, dwpe) at B 16, T 1024, C 768, bf16, against the reference;
// the sort alone is timed too (the same in both). The bits are compared on the timed runs (dwte
// from zero, dwpe overwritten) and once more adding to random gradients.
json embedding_case(const std::string& name, const std::vector<int32_t>& tok, const Options& o,
                    cudaStream_t s, bool& all_ok) {
  const int N = kB * kT;
  const size_t nc = size_t(N) * kC, wte = size_t(kPaddedVocab) * kC, wpe = size_t(kT) * kC;
  DeviceBuffer dout(nc * 2), tokens(N * 4), scratch(3 * sizeof(unsigned));
  DeviceBuffer ref_scratch(rb::reference_embedding_scratch_bytes(N, kVocab)),
      eng_scratch(rc::embedding_backward_scratch_bytes(N, kVocab));
  DeviceBuffer ref_wte(wte * 4), eng_wte(wte * 4), ref_wpe(wpe * 4), eng_wpe(wpe * 4);
  RY_CUDA(cudaMemcpy(tokens.as<void>(), tok.data(), N * 4, cudaMemcpyHostToDevice));
  rb::fill_uniform(dout.as<void>(), nc, true, 1e-2f, 21, s);
  auto run_ref = [&](bool acc) {
    rb::reference_embedding_backward(ref_wte.as<float>(), ref_wpe.as<float>(),
                                     ref_scratch.as<void>(), dout.as<bf16>(), tokens.as<int32_t>(),
                                     kB, kT, kC, kVocab, acc, s);
  };
  auto run_eng = [&](bool acc) {
    rc::embedding_backward(eng_wte.as<float>(), eng_wpe.as<float>(), eng_scratch.as<void>(),
                           dout.as<bf16>(), tokens.as<int32_t>(), kB, kT, kC, kVocab, acc, s);
  };
  auto zero = [&](DeviceBuffer& d) { RY_CUDA(cudaMemsetAsync(d.as<void>(), 0, d.bytes(), s)); };
  const std::vector<Contender> cs = {
      {[&] { zero(ref_wte); }, [&] { run_ref(false); }},
      {[&] { zero(eng_wte); }, [&] { run_eng(false); }},
      {[] {},
       [&] {
         rb::reference_embedding_sort(ref_scratch.as<void>(), tokens.as<int32_t>(), N, kVocab, s);
       }}};
  const auto us = time_rounds(cs, o, s);
  const std::vector<bool> f32 = {false, false};
  bool same = same_outputs({{&eng_wte, &ref_wte}, {&eng_wpe, &ref_wpe}}, f32, scratch, s);
  for (DeviceBuffer* d : {&ref_wte, &eng_wte})
    rb::fill_uniform(d->as<void>(), wte, false, 1.0f, 22, s);
  for (DeviceBuffer* d : {&ref_wpe, &eng_wpe})
    rb::fill_uniform(d->as<void>(), wpe, false, 1.0f, 23, s);
  run_ref(true);
  run_eng(true);
  same = same_outputs({{&eng_wte, &ref_wte}, {&eng_wpe, &ref_wpe}}, f32, scratch, s) && same;
  all_ok = all_ok && same;
  const size_t distinct = std::set<int32_t>(tok.begin(), tok.end()).size();
  const double bytes = 2.0 * nc * 2 + 2.0 * distinct * kC * 4 + wpe * 4.0 + N * 4.0 * 6;
  std::printf("(%zu distinct tokens of %d)\n", distinct, N);
  json r = report(name, {"before issue 12", "engine", "sort alone (both)"}, us,
                  {bytes, bytes, bytes}, {"ref", same ? "same bits" : "NOT THE SAME BITS", "-"});
  r["same_bits"] = same;
  r["distinct_tokens"] = distinct;
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = railyard::bench::parse_timing(argc, argv, kUsage);
  cudaStream_t s;
  RY_CUDA(cudaStreamCreate(&s));
  std::printf("%-44s %-26s %9s %9s %8s  %s\n", "case", "kernel", "median us", "min us", "TB/s",
              "check");
  bool all_ok = true;
  json out;
  out["warmup"] = o.warmup;
  out["reps"] = o.reps;
  out["layernorm_backward"] = {layernorm_case(true, true, o, s, all_ok),
                               layernorm_case(false, true, o, s, all_ok),
                               layernorm_case(true, false, o, s, all_ok)};
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
