#include <cuda_bf16.h>

#include <cmath>

#include "cuda_check.hpp"
#include "gemm_survey_kernels.hpp"

namespace railyard::bench {

namespace {

__device__ uint64_t mix(uint64_t z) {  // splitmix64's finalizer
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

__global__ void fill_kernel(void* p, size_t n, bool bf16, float scale, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const double u = double(mix(seed * 0x100000000ULL + i) >> 11) * 0x1p-53;
    const float v = static_cast<float>((2 * u - 1) * scale);
    if (bf16)
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
    else
      static_cast<float*>(p)[i] = v;
  }
}

// out[0]: any bits differ; out[1], out[2]: max |a - ref| and max |ref| as float bits (the
// order of non-negative floats is their bits' order, so atomicMax gives the same maximum
// whatever order the threads finish in).
__global__ void compare_kernel(const void* a, const void* ref, size_t n, bool bf16, unsigned* out) {
  float diff = 0, scale = 0;
  bool differ = false;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float x, r;
    if (bf16) {
      const auto xa = static_cast<const __nv_bfloat16*>(a)[i];
      const auto xr = static_cast<const __nv_bfloat16*>(ref)[i];
      differ |= __bfloat16_as_ushort(xa) != __bfloat16_as_ushort(xr);
      x = __bfloat162float(xa), r = __bfloat162float(xr);
    } else {
      x = static_cast<const float*>(a)[i], r = static_cast<const float*>(ref)[i];
      differ |= __float_as_uint(x) != __float_as_uint(r);
    }
    const float e = fabsf(x - r);
    diff = isfinite(e) ? fmaxf(diff, e) : INFINITY;
    if (isfinite(r)) scale = fmaxf(scale, fabsf(r));
  }
  if (differ) atomicOr(&out[0], 1u);
  atomicMax(&out[1], __float_as_uint(diff));
  atomicMax(&out[2], __float_as_uint(scale));
}

}  // namespace

void fill_uniform(void* p, size_t n, bool bf16, float scale, uint64_t seed, cudaStream_t stream) {
  fill_kernel<<<1024, 256, 0, stream>>>(p, n, bf16, scale, seed);
  RY_CUDA_LAUNCHED();
}

Comparison compare(const void* a, const void* ref, size_t n, bool bf16, unsigned* scratch,
                   cudaStream_t stream) {
  RY_CUDA(cudaMemsetAsync(scratch, 0, 3 * sizeof(unsigned), stream));
  compare_kernel<<<1024, 256, 0, stream>>>(a, ref, n, bf16, scratch);
  RY_CUDA_LAUNCHED();
  unsigned h[3];
  RY_CUDA(cudaMemcpyAsync(h, scratch, sizeof h, cudaMemcpyDeviceToHost, stream));
  RY_CUDA(cudaStreamSynchronize(stream));
  float diff, scale;
  static_assert(sizeof(float) == sizeof(unsigned));
  __builtin_memcpy(&diff, &h[1], sizeof diff);
  __builtin_memcpy(&scale, &h[2], sizeof scale);
  return {h[0] == 0, diff, scale};
}

}  // namespace railyard::bench
