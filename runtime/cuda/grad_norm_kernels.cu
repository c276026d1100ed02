#include <algorithm>
#include <cstdint>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "grad_norm_kernels.hpp"

namespace railyard::cuda {

namespace {

constexpr int kBlocks = 1056, kThreads = 512;  // 8 blocks of 512 per H200 multiprocessor

// Pass one: each block's sum of squares, over a fixed partition: 16-byte loads over the aligned
// body (a grid-stride loop), the at most 3 elements before it and 3 after it by block 0, then a
// fixed block tree.
__global__ void grad_sumsq_kernel(double* partials, const float* g, size_t head, size_t n4,
                                  size_t n) {
  __shared__ float scratch[32];
  float s = 0.0f;
  const float4* body = reinterpret_cast<const float4*>(g + head);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4;
       i += size_t(gridDim.x) * blockDim.x) {
    const float4 v = body[i];
    s += v.x * v.x;
    s += v.y * v.y;
    s += v.z * v.z;
    s += v.w * v.w;
  }
  if (blockIdx.x == 0) {
    const size_t after = head + 4 * n4;
    if (threadIdx.x < head) s += g[threadIdx.x] * g[threadIdx.x];
    if (threadIdx.x < n - after) s += g[after + threadIdx.x] * g[after + threadIdx.x];
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = double(s);
}

// Pass two, one block: the partials added in a fixed order (strided per thread, then a tree).
__global__ void sum_partials_kernel(double* out, const double* partials, size_t count) {
  __shared__ double part[kThreads];
  double s = 0.0;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}

__global__ void clip_factor_kernel(float* scale, const double* sumsq, float clip) {
  double k = clip > 0.0f ? double(clip) / (sqrt(*sumsq) + 1e-6) : 1.0;
  *scale = k < 1.0 ? float(k) : 1.0f;
}

}  // namespace

size_t grad_sumsq_slots(size_t n, size_t max_blocks) {
  if (n == 0) return 0;
  const size_t b = (n + 4 * kThreads - 1) / (4 * kThreads);  // a float4 per thread at least
  return b < max_blocks ? b : max_blocks;
}

size_t grad_sumsq_full_blocks() {
  return kBlocks;
}

void clip_factor_on_device(float* scale, const double* sumsq, float clip, cudaStream_t stream) {
  clip_factor_kernel<<<1, 1, 0, stream>>>(scale, sumsq, clip);
  RY_CUDA_LAUNCHED();
}

void grad_sumsq_slice(double* slots, const float* g, size_t n, size_t max_blocks,
                      cudaStream_t stream) {
  const size_t blocks = grad_sumsq_slots(n, max_blocks);
  if (blocks == 0) return;
  // Elements before the first 16-byte boundary (none for the engine's buckets, which start on
  // ParamLayout::kAlign elements).
  const size_t misaligned = (reinterpret_cast<uintptr_t>(g) % 16) / sizeof(float);
  const size_t head = std::min(n, (4 - misaligned) % 4);
  grad_sumsq_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(slots, g, head, (n - head) / 4, n);
  RY_CUDA_LAUNCHED();
}

void sum_slots(double* out, const double* slots, size_t count, cudaStream_t stream) {
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(out, slots, count);
  RY_CUDA_LAUNCHED();
}

}  // namespace railyard::cuda
