#include "adamw_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "adamw_streaming.cuh"
#include "cuda_check.hpp"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

constexpr int kThreads = 256;
// One quad (four 16-byte loads) per thread and a block per 256 quads: the fastest shape that
// bench/adamw_bench.cpp measured on the H200 (890 us against 1032 for one element per thread,
// 961 for two quads per thread in one wave with evict-first hints; bench/NOTES.md).
constexpr int kQuads = 1;

void check_aligned(const void* p, size_t alignment, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0) {
    throw std::invalid_argument(std::string("adamw_update: ") + what + " at " +
                                std::to_string(reinterpret_cast<uintptr_t>(p)) + " is not on a " +
                                std::to_string(alignment) +
                                "-byte boundary: the kernel reads and writes 16-byte vectors; "
                                "start the slice on a multiple of 4 elements of a cudaMalloc'd "
                                "buffer");
  }
}

}  // namespace

std::vector<uint32_t> pack_decay_mask(const std::vector<uint8_t>& decay) {
  std::vector<uint32_t> bits(decay_mask_words(decay.size()), 0);
  for (size_t i = 0; i < decay.size(); ++i) {
    if (decay[i] != 0) bits[i / 32] |= uint32_t{1} << (i % 32);
  }
  return bits;
}

template <typename T>
void adamw_update(float* params, T* compute, float* m, float* v, const float* grads,
                  const uint32_t* decay, size_t n, const AdamWStep& s, cudaStream_t stream) {
  if (n == 0) return;
  check_aligned(params, 16, "the weights");
  check_aligned(m, 16, "m");
  check_aligned(v, 16, "v");
  check_aligned(grads, 16, "the gradients");
  check_aligned(compute, 4 * sizeof(T), "the compute copy");
  // A block for every kThreads quads, so the kernel's loop runs once per thread.
  const size_t per_block = size_t(kQuads) * kThreads;
  const size_t grid = std::max<size_t>((n / 4 + per_block - 1) / per_block, 1);
  adamw_streaming_kernel<T, kQuads, false><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
      params, compute, m, v, grads, decay, n, s);
  RY_CUDA_LAUNCHED();
}

template void adamw_update<float>(float*, float*, float*, float*, const float*, const uint32_t*,
                                  size_t, const AdamWStep&, cudaStream_t);
template void adamw_update<bf16>(float*, bf16*, float*, float*, const float*, const uint32_t*,
                                 size_t, const AdamWStep&, cudaStream_t);

}  // namespace railyard::cuda
