#include "cuda_check.hpp"
#include "device_math.cuh"
#include "grad_norm_kernels.hpp"

namespace railyard::cuda {

namespace {

__global__ void grad_sumsq_kernel(double* out, const float* g, size_t n) {
  __shared__ float scratch[32];
  float s = 0.0f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    s += g[i] * g[i];
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) atomicAdd(out, double(s));
}

}  // namespace

void grad_sumsq(double* out, const float* g, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  size_t b = (n + 511) / 512;
  grad_sumsq_kernel<<<static_cast<int>(b < 1056 ? b : 1056), 512, 0, stream>>>(out, g, n);
  RY_CUDA_LAUNCHED();
}

}  // namespace railyard::cuda
