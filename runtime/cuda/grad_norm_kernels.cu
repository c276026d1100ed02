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

__global__ void clip_factor_kernel(float* scale, const double* sumsq, float clip) {
  double k = clip > 0.0f ? double(clip) / (sqrt(*sumsq) + 1e-6) : 1.0;
  *scale = k < 1.0 ? float(k) : 1.0f;
}

}  // namespace

void clip_factor_on_device(float* scale, const double* sumsq, float clip, cudaStream_t stream) {
  clip_factor_kernel<<<1, 1, 0, stream>>>(scale, sumsq, clip);
  RY_CUDA_LAUNCHED();
}

void grad_sumsq(double* out, const float* g, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  size_t b = (n + 511) / 512;
  grad_sumsq_kernel<<<static_cast<int>(b < 1056 ? b : 1056), 512, 0, stream>>>(out, g, n);
  RY_CUDA_LAUNCHED();
}

}  // namespace railyard::cuda
