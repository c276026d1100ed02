// The LM head's loss kernel alone (runtime/cuda/cross_entropy_kernels.cu, bench/NOTES.md issue
// 12): cross_entropy_forward_backward with the gradient on one chunk of the head's logits, by
// default GPT-2's (4096 rows of 50304 bf16 columns, 50257 real), timed with cudaEvents. Prints the
// path it took (staged in shared memory or read twice), median and minimum microseconds over
// the repetitions and the device-memory rate of one read and one write of the logits.
//
//   cross_entropy_bench [ROWS VOCAB PADDED]
//
// Each timed call starts from the same logits (copied back in, outside the timed span).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "cross_entropy_kernels.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "dtype.hpp"
#include "railyard/splitmix64.hpp"

using railyard::cuda::bf16;
using railyard::cuda::DeviceBuffer;

namespace {

constexpr int kWarmup = 5, kReps = 50;

int argument(int argc, char** argv, int i, int fallback) {
  if (argc == 1) return fallback;
  if (argc != 4) throw std::invalid_argument("usage: cross_entropy_bench [ROWS VOCAB PADDED]");
  const std::string a = argv[i];
  size_t used = 0;
  const int v = std::stoi(a, &used);
  if (used != a.size() || v <= 0) throw std::invalid_argument(a + ": expected a positive integer");
  return v;
}

// Logits about N(0, 3) from SplitMix64 (a sum of four uniforms), targets uniform over the real
// vocabulary with every 17th position ignored, as the GPU check does.
void fill(std::vector<bf16>& logits, std::vector<int32_t>& targets, int V) {
  uint64_t state = 12;
  auto uniform = [&] { return float(railyard::splitmix64_next(state) >> 40) / float(1 << 24); };
  for (bf16& x : logits) x = bf16(3.0f * (uniform() + uniform() + uniform() + uniform() - 2.0f));
  for (size_t i = 0; i < targets.size(); ++i) {
    targets[i] = i % 17 == 5 ? -1 : int32_t(railyard::splitmix64_next(state) % uint64_t(V));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int N = argument(argc, argv, 1, 4096), V = argument(argc, argv, 2, 50257),
              Vp = argument(argc, argv, 3, 50304);
    if (V > Vp) throw std::invalid_argument("VOCAB above PADDED: the padding is PADDED - VOCAB");
    const size_t bytes = size_t(N) * Vp * sizeof(bf16);
    std::vector<bf16> h(size_t(N) * Vp);
    std::vector<int32_t> ht(N);
    fill(h, ht, V);
    DeviceBuffer pristine(bytes), logits(bytes), losses(N * sizeof(float)),
        targets(N * sizeof(int32_t));
    RY_CUDA(cudaMemcpy(pristine.as<bf16>(), h.data(), bytes, cudaMemcpyHostToDevice));
    RY_CUDA(
        cudaMemcpy(targets.as<int32_t>(), ht.data(), N * sizeof(int32_t), cudaMemcpyHostToDevice));
    cudaEvent_t start, stop;
    RY_CUDA(cudaEventCreate(&start));
    RY_CUDA(cudaEventCreate(&stop));
    std::vector<float> us;
    for (int i = 0; i < kWarmup + kReps; ++i) {
      RY_CUDA(cudaMemcpy(logits.as<bf16>(), pristine.as<bf16>(), bytes, cudaMemcpyDeviceToDevice));
      RY_CUDA(cudaEventRecord(start));
      railyard::cuda::cross_entropy_forward_backward(logits.as<bf16>(), losses.as<float>(),
                                                     targets.as<int32_t>(), N, V, Vp, 1.0f / N,
                                                     true, nullptr);
      RY_CUDA(cudaEventRecord(stop));
      RY_CUDA(cudaEventSynchronize(stop));
      float ms = 0;
      RY_CUDA(cudaEventElapsedTime(&ms, start, stop));
      if (i >= kWarmup) us.push_back(1000.0f * ms);
    }
    std::sort(us.begin(), us.end());
    const float median = us[us.size() / 2];
    std::printf(
        "cross_entropy_bench: %d x %d (%d real) bf16, %s: median %.1f us, min %.1f us, "
        "%.2f TB/s for one read and one write\n",
        N, Vp, V, railyard::cuda::cross_entropy_staged<bf16>(Vp) ? "staged" : "read twice", median,
        us.front(), 2.0 * double(bytes) / (median * 1e-6) / 1e12);
    RY_CUDA(cudaEventDestroy(start));
    RY_CUDA(cudaEventDestroy(stop));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cross_entropy_bench: %s\n", e.what());
    return 1;
  }
}
