// The LM head's loss kernel alone (runtime/cuda/cross_entropy_kernels.cu, bench/NOTES.md issue
// 12): cross_entropy_forward_backward with the gradient on one chunk of the head's logits, GPT-2's
// (4096 rows of 50304 bf16 columns, 50257 real), timed with cudaEvents. Prints the median and
// minimum microseconds and the device-memory rate of one read and one write of the logits; whether
// the kernel gives the same bits twice; and its errors against float64 on a sample of rows.
//
//   cross_entropy_bench [--warmup 5] [--reps 30] [--json FILE]
//
// Each timed call starts from the same logits (copied back in, outside the timed span). Exits 1
// where the engine's kernel does not repeat its bits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "cross_entropy_kernels.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "dtype.hpp"
#include "railyard/splitmix64.hpp"

using railyard::cuda::bf16;
using railyard::cuda::DeviceBuffer;
using json = nlohmann::json;

namespace {

constexpr int kRows = 4096, kVocab = 50257, kPadded = 50304;
constexpr int kSampleEvery = 64;  // rows checked against float64: 64 of 4096
constexpr float kDscale = 1.0f / kRows;
constexpr const char* kUsage =
    "usage: cross_entropy_bench [--warmup 5] [--reps 30] [--json FILE]\n";

// Logits about N(0, 3) from SplitMix64 (a sum of four uniforms), targets uniform over the real
// vocabulary with every 17th position ignored, as the GPU check does.
void fill(std::vector<bf16>& logits, std::vector<int32_t>& targets) {
  uint64_t state = 12;
  auto uniform = [&] { return float(railyard::splitmix64_next(state) >> 40) / float(1 << 24); };
  for (bf16& x : logits) x = bf16(3.0f * (uniform() + uniform() + uniform() + uniform() - 2.0f));
  for (size_t i = 0; i < targets.size(); ++i) {
    targets[i] = i % 17 == 5 ? -1 : int32_t(railyard::splitmix64_next(state) % uint64_t(kVocab));
  }
}

struct Inputs {
  std::vector<bf16> host;
  std::vector<int32_t> targets;
  DeviceBuffer pristine, logits, losses, dtargets;
  size_t bytes;
};

// One kernel's run: the times (sorted) and the results of the last call.
struct Run {
  std::vector<float> us;
  std::vector<bf16> grad;
  std::vector<float> loss;
};

using Kernel = std::function<void(bf16*, float*, const int32_t*)>;

void results(Inputs& in, Run& r) {
  r.grad.resize(in.host.size());
  r.loss.resize(kRows);
  RY_CUDA(cudaMemcpy(r.grad.data(), in.logits.as<bf16>(), in.bytes, cudaMemcpyDeviceToHost));
  RY_CUDA(cudaMemcpy(r.loss.data(), in.losses.as<float>(), kRows * sizeof(float),
                     cudaMemcpyDeviceToHost));
}

Run time_kernel(Inputs& in, const Kernel& k, const railyard::bench::TimingOptions& o) {
  cudaEvent_t start, stop;
  RY_CUDA(cudaEventCreate(&start));
  RY_CUDA(cudaEventCreate(&stop));
  Run r;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    RY_CUDA(cudaMemcpy(in.logits.as<bf16>(), in.pristine.as<bf16>(), in.bytes,
                       cudaMemcpyDeviceToDevice));
    RY_CUDA(cudaMemset(in.losses.as<float>(), 0xff, kRows * sizeof(float)));
    RY_CUDA(cudaEventRecord(start));
    k(in.logits.as<bf16>(), in.losses.as<float>(), in.dtargets.as<int32_t>());
    RY_CUDA(cudaEventRecord(stop));
    RY_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    RY_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (i >= o.warmup) r.us.push_back(1000.0f * ms);
  }
  std::sort(r.us.begin(), r.us.end());
  results(in, r);
  RY_CUDA(cudaEventDestroy(start));
  RY_CUDA(cudaEventDestroy(stop));
  return r;
}

// Largest error against float64 over every kSampleEvery-th row: (gradient, loss).
std::pair<double, double> float64_error(const Inputs& in, const Run& r) {
  double g = 0, l = 0;
  std::vector<double> x(kVocab);
  for (int n = 0; n < kRows; n += kSampleEvery) {
    const size_t row = size_t(n) * kPadded;
    double m = -INFINITY, s = 0;
    for (int j = 0; j < kVocab; ++j) m = std::max(m, x[j] = double(float(in.host[row + j])));
    for (int j = 0; j < kVocab; ++j) s += std::exp(x[j] - m);
    const int t = in.targets[n];
    l = std::max(l, std::fabs((t < 0 ? 0.0 : std::log(s) + m - x[t]) - double(r.loss[n])));
    for (int j = 0; j < kPadded; ++j) {
      const double want =
          t < 0 || j >= kVocab ? 0.0 : kDscale * (std::exp(x[j] - m) / s - (j == t ? 1.0 : 0.0));
      g = std::max(g, std::fabs(want - double(float(r.grad[row + j]))));
    }
  }
  return {g, l};
}

json line(const char* who, const Run& r, const Inputs& in, const char* same) {
  const double median = r.us[r.us.size() / 2], rate = 2.0 * double(in.bytes) / (median * 1e-6);
  const auto e = float64_error(in, r);
  std::printf("%-46s %9.1f %9.1f %7.2f %10.2e %10.2e %5s\n", who, median, r.us.front(), rate / 1e12,
              e.first, e.second, same);
  return {{"kernel", who},           {"median_us", median},     {"min_us", r.us.front()},
          {"tb_per_s", rate / 1e12}, {"grad_err_f64", e.first}, {"loss_err_f64", e.second}};
}

}  // namespace

int main(int argc, char** argv) try {
  const railyard::bench::TimingOptions o = railyard::bench::parse_timing(argc, argv, kUsage);
  Inputs in{std::vector<bf16>(size_t(kRows) * kPadded),
            std::vector<int32_t>(kRows),
            DeviceBuffer(size_t(kRows) * kPadded * sizeof(bf16)),
            DeviceBuffer(size_t(kRows) * kPadded * sizeof(bf16)),
            DeviceBuffer(kRows * sizeof(float)),
            DeviceBuffer(kRows * sizeof(int32_t)),
            size_t(kRows) * kPadded * sizeof(bf16)};
  fill(in.host, in.targets);
  RY_CUDA(cudaMemcpy(in.pristine.as<bf16>(), in.host.data(), in.bytes, cudaMemcpyHostToDevice));
  RY_CUDA(cudaMemcpy(in.dtargets.as<int32_t>(), in.targets.data(), kRows * sizeof(int32_t),
                     cudaMemcpyHostToDevice));
  const Kernel engine = [](bf16* x, float* l, const int32_t* t) {
    railyard::cuda::cross_entropy_forward_backward(x, l, t, kRows, kVocab, kPadded, kDscale, true,
                                                   nullptr);
  };
  const Run now = time_kernel(in, engine, o);
  railyard::bench::TimingOptions once = o;
  once.warmup = 0;
  once.reps = 1;
  const Run again = time_kernel(in, engine, once);
  const bool same = again.grad.size() == now.grad.size() &&
                    std::memcmp(again.grad.data(), now.grad.data(), in.bytes) == 0 &&
                    std::memcmp(again.loss.data(), now.loss.data(), kRows * sizeof(float)) == 0;
  const int rows = railyard::cuda::cross_entropy_staged_rows<bf16>(kPadded);
  std::printf("cross_entropy_bench: %d x %d (%d real) bf16, gradient in place, dscale 1/%d\n",
              kRows, kPadded, kVocab, kRows);
  std::printf("%-46s %9s %9s %7s %10s %10s %5s\n", "kernel", "median us", "min us", "TB/s",
              "grad f64", "loss f64", "same");
  json out{{"rows", kRows},  {"vocab", kVocab},   {"padded", kPadded},         {"warmup", o.warmup},
           {"reps", o.reps}, {"same_bits", same}, {"engine_staged_rows", rows}};
  const std::string who =
      rows > 0 ? "engine (" + std::to_string(rows) + " blocks x 512 per SM, cp.async)"
               : std::string("engine (read twice)");
  out["runs"] = {line(who.c_str(), now, in, same ? "yes" : "NO")};
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << out.dump(2) << "\n";
    if (!f) throw std::runtime_error("cannot write " + o.json + ": check the directory");
  }
  if (!same) {
    std::fprintf(stderr,
                 "cross_entropy_bench: the engine's kernel gave other bits the second time\n");
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cross_entropy_bench: %s\n", e.what());
  return 1;
}
