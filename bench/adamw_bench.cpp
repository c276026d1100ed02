// The optimizer's update alone (runtime/cuda/adamw_kernels.cu, bench/NOTES.md issue 12): AdamW on
// GPT-2 124M's flat state (gpt_param_layout with the padded vocabulary, as the engine pads it at
// world size 1, and its real decay mask), bf16 compute copy, the clip factor read on the device.
// Times the engine's kernel before issue 12 (the reference), the other memory-access shapes of
// bench/adamw_variants.cu and the engine's adamw_update as built: round by round (each variant
// once per round, after --warmup rounds), median and minimum microseconds and the rate of the
// update's device-memory traffic. Each variant's new weights, compute copy, m and v are compared
// bit for bit with the reference's from the same inputs, on the model's state and on a small
// state of odd size (a tail of 3 elements, decay runs not aligned to 32-bit words); any
// difference fails the run (exit 1).
//
//   adamw_bench [--warmup 5] [--reps 30] [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "adamw_kernels.hpp"
#include "adamw_variants.hpp"
#include "bench_args.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "gemm_algo_json.hpp"
#include "gemm_survey_kernels.hpp"
#include "railyard/adamw.hpp"
#include "railyard/gpt_config.hpp"

using railyard::bench::AdamWOperands;
using railyard::bench::AdamWVariant;
using railyard::cuda::AdamWStep;
using railyard::cuda::DeviceBuffer;
using bf16 = __nv_bfloat16;
using json = nlohmann::json;

namespace {

constexpr const char* kUsage = "usage: adamw_bench [--warmup 5] [--reps 30] [--json FILE]\n";

using Options = railyard::bench::TimingOptions;

// GPT-2 124M as bench/gpu_bench.sh trains it: its decay bits, one per element of the flat state.
std::vector<uint32_t> gpt2_decay_bits(size_t& n) {
  railyard::GptConfig cfg;
  cfg.vocab = 50257;
  cfg.padded_vocab = railyard::padded_vocab_for(cfg.vocab);
  cfg.max_seq = 1024;
  cfg.layers = cfg.heads = 12;
  cfg.dim = 768;
  const railyard::ParamLayout layout = railyard::gpt_param_layout(cfg);
  n = layout.total();
  std::vector<uint32_t> bits(railyard::cuda::decay_mask_words(n), 0);
  for (const railyard::TensorSpec& t : layout.tensors()) {
    if (!t.decay) continue;
    for (size_t i = t.offset; i < t.offset + t.numel; ++i) bits[i / 32] |= uint32_t{1} << (i % 32);
  }
  return bits;
}

// The optimizer's state on the device, a pristine copy to start each checked run from, and the
// reference's results to compare with.
struct State {
  size_t n;
  DeviceBuffer params, m, v, grads, compute, decay, scale;
  DeviceBuffer params0, m0, v0;
  DeviceBuffer ref_params, ref_m, ref_v, ref_compute;

  DeviceBuffer scratch;  // compare()'s

  State(size_t elements, const std::vector<uint32_t>& bits)
      : n(elements),
        params(n * 4),
        m(n * 4),
        v(n * 4),
        grads(n * 4),
        compute(n * 2),
        decay(bits.size() * 4),
        scale(4),
        params0(n * 4),
        m0(n * 4),
        v0(n * 4),
        ref_params(n * 4),
        ref_m(n * 4),
        ref_v(n * 4),
        ref_compute(n * 2),
        scratch(3 * sizeof(unsigned)) {
    RY_CUDA(cudaMemcpy(decay.as<void>(), bits.data(), bits.size() * 4, cudaMemcpyHostToDevice));
    const float clip = 0.7f;  // a clipped step: the factor read on the device, as the engine does
    RY_CUDA(cudaMemcpy(scale.as<void>(), &clip, 4, cudaMemcpyHostToDevice));
    // A pageable cudaMemcpy may return before its DMA lands; the stream does not wait for it.
    RY_CUDA(cudaDeviceSynchronize());
  }
  void reset(cudaStream_t s) {
    RY_CUDA(
        cudaMemcpyAsync(params.as<void>(), params0.as<void>(), n * 4, cudaMemcpyDeviceToDevice, s));
    RY_CUDA(cudaMemcpyAsync(m.as<void>(), m0.as<void>(), n * 4, cudaMemcpyDeviceToDevice, s));
    RY_CUDA(cudaMemcpyAsync(v.as<void>(), v0.as<void>(), n * 4, cudaMemcpyDeviceToDevice, s));
    RY_CUDA(cudaMemsetAsync(compute.as<void>(), 0xff, n * 2, s));
  }
  AdamWOperands operands() const {
    return {params.as<float>(),
            compute.as<bf16>(),
            m.as<float>(),
            v.as<float>(),
            grads.as<float>(),
            decay.as<uint32_t>(),
            n};
  }
  // The update's device-memory traffic: params, m, v read and written, grads read, the compute
  // copy written, the decay bits read.
  double bytes() const { return double(n) * (4 * 4 + 3 * 4 + 2) + double(decay.bytes()); }
};

// Step 5 at GPT-2's peak learning rate, railyard-train's other hyperparameters.
AdamWStep adamw_step(const float* device_scale) {
  const railyard::AdamWParams hp;
  AdamWStep s;
  s.lr = 6e-4f;
  s.beta1 = hp.beta1;
  s.beta2 = hp.beta2;
  s.eps = hp.eps;
  s.weight_decay = hp.weight_decay;
  s.bias_correction1 = float(1.0 - std::pow(double(hp.beta1), 5.0));
  s.bias_correction2 = float(1.0 - std::pow(double(hp.beta2), 5.0));
  s.device_grad_scale = device_scale;
  return s;
}

// The reference's results (variants[0]) from the pristine state into st.ref_*.
void run_reference(State& st, const AdamWVariant& ref, cudaStream_t s) {
  st.reset(s);
  ref.run(st.operands(), adamw_step(st.scale.as<float>()), s);
  RY_CUDA(cudaMemcpyAsync(st.ref_params.as<void>(), st.params.as<void>(), st.n * 4,
                          cudaMemcpyDeviceToDevice, s));
  RY_CUDA(
      cudaMemcpyAsync(st.ref_m.as<void>(), st.m.as<void>(), st.n * 4, cudaMemcpyDeviceToDevice, s));
  RY_CUDA(
      cudaMemcpyAsync(st.ref_v.as<void>(), st.v.as<void>(), st.n * 4, cudaMemcpyDeviceToDevice, s));
  RY_CUDA(cudaMemcpyAsync(st.ref_compute.as<void>(), st.compute.as<void>(), st.n * 2,
                          cudaMemcpyDeviceToDevice, s));
}

// The pristine state, as after a first step: weights uniform in +-0.1, the moments one reference
// update from zero (so v >= 0 and m, v have the shape of real moments), then a new gradient, and
// the reference's results from it.
void prepare(State& st, const AdamWVariant& ref, cudaStream_t s) {
  using railyard::bench::fill_uniform;
  fill_uniform(st.params0.as<void>(), st.n, false, 0.1f, 1, s);
  RY_CUDA(cudaMemsetAsync(st.m0.as<void>(), 0, st.n * 4, s));
  RY_CUDA(cudaMemsetAsync(st.v0.as<void>(), 0, st.n * 4, s));
  fill_uniform(st.grads.as<void>(), st.n, false, 1e-2f, 2, s);
  run_reference(st, ref, s);
  RY_CUDA(cudaMemcpyAsync(st.params0.as<void>(), st.ref_params.as<void>(), st.n * 4,
                          cudaMemcpyDeviceToDevice, s));
  RY_CUDA(cudaMemcpyAsync(st.m0.as<void>(), st.ref_m.as<void>(), st.n * 4, cudaMemcpyDeviceToDevice,
                          s));
  RY_CUDA(cudaMemcpyAsync(st.v0.as<void>(), st.ref_v.as<void>(), st.n * 4, cudaMemcpyDeviceToDevice,
                          s));
  fill_uniform(st.grads.as<void>(), st.n, false, 1e-2f, 3, s);
  run_reference(st, ref, s);
}

// Each output against the reference's, after one run of `v` from the pristine state: the same
// bits or not, and the largest difference.
json compare_outputs(State& st, const AdamWVariant& v, cudaStream_t s, bool& same) {
  st.reset(s);
  v.run(st.operands(), adamw_step(st.scale.as<float>()), s);
  json out = json::object();
  const struct {
    const char* name;
    const DeviceBuffer &a, &ref;
    bool bf16;
  } outputs[] = {{"params", st.params, st.ref_params, false},
                 {"m", st.m, st.ref_m, false},
                 {"v", st.v, st.ref_v, false},
                 {"compute", st.compute, st.ref_compute, true}};
  for (const auto& o : outputs) {
    const railyard::bench::Comparison c = railyard::bench::compare(
        o.a.as<void>(), o.ref.as<void>(), st.n, o.bf16, st.scratch.as<unsigned>(), s);
    same = same && c.same_bits;
    out[o.name] = {{"same_bits", c.same_bits}, {"max_abs_diff", c.max_abs_diff}};
  }
  return out;
}

// Microseconds of each variant's runs, round by round so that clock and temperature drift fall
// on all alike. The state keeps evolving from run to run (finite: the same gradient each time).
std::vector<std::vector<float>> time_rounds(State& st, const std::vector<AdamWVariant>& vs,
                                            const Options& o, cudaStream_t s) {
  cudaEvent_t start, stop;
  RY_CUDA(cudaEventCreate(&start));
  RY_CUDA(cudaEventCreate(&stop));
  std::vector<std::vector<float>> us(vs.size());
  const AdamWStep step = adamw_step(st.scale.as<float>());
  for (int r = 0; r < o.warmup + o.reps; ++r) {
    for (size_t k = 0; k < vs.size(); ++k) {
      railyard::bench::hold_stream(200, s);
      RY_CUDA(cudaEventRecord(start, s));
      vs[k].run(st.operands(), step, s);
      RY_CUDA(cudaEventRecord(stop, s));
      RY_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      RY_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (r >= o.warmup) us[k].push_back(1000.0f * ms);
    }
  }
  RY_CUDA(cudaEventDestroy(start));
  RY_CUDA(cudaEventDestroy(stop));
  return us;
}

// The small state of odd size: 100003 elements, decay on runs of 1000 (tests/gpu's pattern).
json tail_check(const std::vector<AdamWVariant>& vs, cudaStream_t s, bool& same) {
  const size_t n = 100003;
  std::vector<uint32_t> bits(railyard::cuda::decay_mask_words(n), 0);
  for (size_t i = 0; i < n; ++i) bits[i / 32] |= uint32_t((i / 1000) % 2) << (i % 32);
  State st(n, bits);
  prepare(st, vs[0], s);
  json out = json::object();
  for (size_t k = 1; k < vs.size(); ++k) {
    bool b = true;
    out[vs[k].name] = compare_outputs(st, vs[k], s, b);
    if (!b) std::printf("%s: bits differ from the reference's on %zu elements\n", vs[k].name, n);
    same = same && b;
  }
  return out;
}

// The table, and each variant into out["variants"].
void report(const std::vector<AdamWVariant>& vs, std::vector<std::vector<float>>& us,
            const std::vector<json>& checks, const std::vector<bool>& same, double bytes,
            json& out) {
  std::printf("%-20s %10s %10s %8s %5s  %s\n", "variant", "median us", "min us", "TB/s", "same",
              "shape");
  for (size_t k = 0; k < vs.size(); ++k) {
    std::sort(us[k].begin(), us[k].end());
    const double median = us[k][us[k].size() / 2];
    std::printf("%-20s %10.1f %10.1f %8.3f %5s  %s\n", vs[k].name, median, us[k].front(),
                bytes / (median * 1e-6) / 1e12, same[k] ? "yes" : "NO", vs[k].shape);
    out["variants"].push_back({{"name", vs[k].name},
                               {"shape", vs[k].shape},
                               {"median_us", median},
                               {"min_us", us[k].front()},
                               {"gb_per_s", bytes / (median * 1e-6) / 1e9},
                               {"same_bits_as_reference", bool(same[k])},
                               {"outputs", checks[k]}});
  }
  std::printf(
      "same: params, m, v and the bf16 copy bit-identical to the reference's (variant 1) from the "
      "same state\n");
}

int run_bench(const Options& o) {
  cudaStream_t s = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> owned(s, &cudaStreamDestroy);
  cudaDeviceProp prop{};
  RY_CUDA(cudaGetDeviceProperties(&prop, 0));
  const std::vector<AdamWVariant> vs = railyard::bench::adamw_variants();
  bool same = true;
  json out = {{"gpu", prop.name}, {"warmup", o.warmup}, {"reps", o.reps}};
  out["tail_check"] = tail_check(vs, s, same);
  size_t n = 0;
  const std::vector<uint32_t> bits = gpt2_decay_bits(n);
  State st(n, bits);
  prepare(st, vs[0], s);
  std::vector<json> checks(vs.size(), json::object());
  std::vector<bool> same_k(vs.size(), true);
  for (size_t k = 1; k < vs.size(); ++k) {
    bool b = true;
    checks[k] = compare_outputs(st, vs[k], s, b);
    same_k[k] = b;
    same = same && b;
  }
  std::vector<std::vector<float>> us = time_rounds(st, vs, o, s);
  out["params"] = n;
  out["bytes_per_update"] = st.bytes();
  std::printf("AdamW on %zu parameters (GPT-2 124M, padded), bf16 copy, %.3f GB per update, %s\n",
              n, st.bytes() / 1e9, prop.name);
  report(vs, us, checks, same_k, st.bytes(), out);
  out["same_bits"] = same;
  if (!o.json.empty()) railyard::bench::write_json(o.json, out);
  if (!same) std::fprintf(stderr, "adamw_bench: a variant's bits differ from the reference's\n");
  return same ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = railyard::bench::parse_timing(argc, argv, kUsage);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::fprintf(stderr,
                   "adamw_bench: no CUDA device; run it on the GPU machine "
                   "(bash bench/gpu_bench.sh env build adamw)\n");
      return 1;
    }
    return run_bench(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "adamw_bench: %s\n", e.what());
    return 1;
  }
}
