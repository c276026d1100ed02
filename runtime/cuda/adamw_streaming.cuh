#pragma once
// AdamW's update of one element, and a kernel that applies it to the flat state in the shape of
// a memory stream: the engine runs one shape (adamw_kernels.cu), the AdamW bench
// (bench/adamw_bench.cpp) times several. Every shape has the same arithmetic per element, so
// every shape gives the same bits.
// The update moves about 30 bytes per element and computes little: its speed is the rate at
// which the memory takes in and gives out 16-byte vectors.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "adamw_kernels.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"

namespace railyard::cuda {

// The arithmetic of the engine's first AdamW kernel, expression for expression: the same
// operations in the same order (and so the same contractions), whatever shape reads the operands.
__device__ __forceinline__ void adamw_element(float& p, float& m, float& v, float grad, bool decay,
                                              float scale, const AdamWStep& s) {
  float g = grad * scale;
  float mi = s.beta1 * m + (1.0f - s.beta1) * g;
  float vi = s.beta2 * v + (1.0f - s.beta2) * g * g;
  m = mi;
  v = vi;
  if (decay) p *= 1.0f - s.lr * s.weight_decay;
  float mhat = mi / s.bias_correction1;
  float vhat = vi / s.bias_correction2;
  p -= s.lr * mhat / (sqrtf(vhat) + s.eps);
}

// 16 bytes of fp32 in and out; kStream marks them used once (evict first from L2 and L1).
template <bool kStream>
__device__ __forceinline__ float4 load4(const float* p) {
  const float4* q = reinterpret_cast<const float4*>(p);
  if constexpr (kStream) return __ldcs(q);
  return *q;
}
template <bool kStream>
__device__ __forceinline__ void store4(float* p, float4 x) {
  float4* q = reinterpret_cast<float4*>(p);
  if constexpr (kStream) {
    __stcs(q, x);
  } else {
    *q = x;
  }
}
// Four new weights into the compute copy: 8 bytes in bf16, rounded as from_f rounds one.
template <bool kStream>
__device__ __forceinline__ void store4(__nv_bfloat16* p, float4 x) {
  auto bits = [](float f) { return uint32_t(__bfloat16_as_ushort(from_f<__nv_bfloat16>(f))); };
  uint2 u;
  u.x = bits(x.x) | bits(x.y) << 16;  // little-endian: the lower address in the lower half
  u.y = bits(x.z) | bits(x.w) << 16;
  uint2* q = reinterpret_cast<uint2*>(p);
  if constexpr (kStream) {
    __stcs(q, u);
  } else {
    *q = u;
  }
}

// Elements 4q .. 4q+3 (a quad): the decay bits are one nibble of word q / 8.
template <typename T, bool kStream>
struct AdamWQuad {
  float4 p, m, v, g;
  uint32_t bits;

  __device__ __forceinline__ void load(const float* params, const float* mm, const float* vv,
                                       const float* grads, const uint32_t* decay, size_t q) {
    p = load4<kStream>(params + 4 * q);
    m = load4<kStream>(mm + 4 * q);
    v = load4<kStream>(vv + 4 * q);
    g = load4<kStream>(grads + 4 * q);
    bits = decay[q / 8] >> (4 * (q % 8));
  }
  __device__ __forceinline__ void update_store(float* params, T* compute, float* mm, float* vv,
                                               size_t q, float scale, const AdamWStep& s) {
    adamw_element(p.x, m.x, v.x, g.x, bits & 1u, scale, s);
    adamw_element(p.y, m.y, v.y, g.y, (bits >> 1) & 1u, scale, s);
    adamw_element(p.z, m.z, v.z, g.z, (bits >> 2) & 1u, scale, s);
    adamw_element(p.w, m.w, v.w, g.w, (bits >> 3) & 1u, scale, s);
    store4<kStream>(mm + 4 * q, m);
    store4<kStream>(vv + 4 * q, v);
    store4<kStream>(params + 4 * q, p);
    if (compute != nullptr) store4<kStream>(compute + 4 * q, p);
  }
};

// n elements; every array starts on a 16-byte boundary (compute on 4 * sizeof(T)). Thread t
// takes quads t, t + S, ..., t + (kQuads - 1) S (S the grid's threads) in one round, all loads
// issued before the first store, then moves on by kQuads * S: kQuads * 64 bytes in flight per
// thread, each warp's loads 512 contiguous bytes. The last n % 4 elements go one per thread.
template <typename T, int kQuads, bool kStream>
__global__ void adamw_streaming_kernel(float* params, T* compute, float* m, float* v,
                                       const float* grads, const uint32_t* decay, size_t n,
                                       AdamWStep s) {
  const float scale = s.grad_scale * (s.device_grad_scale != nullptr ? *s.device_grad_scale : 1.0f);
  const size_t quads = n / 4, threads = size_t(gridDim.x) * blockDim.x;
  const size_t t = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (size_t q0 = t; q0 < quads; q0 += kQuads * threads) {
    AdamWQuad<T, kStream> x[kQuads];
#pragma unroll
    for (int k = 0; k < kQuads; ++k) {
      if (q0 + k * threads < quads) x[k].load(params, m, v, grads, decay, q0 + k * threads);
    }
#pragma unroll
    for (int k = 0; k < kQuads; ++k) {
      if (q0 + k * threads < quads)
        x[k].update_store(params, compute, m, v, q0 + k * threads, scale, s);
    }
  }
  const size_t i = 4 * quads + t;
  if (i < n) {
    float p = params[i], mi = m[i], vi = v[i];
    adamw_element(p, mi, vi, grads[i], (decay[i / 32] >> (i % 32)) & 1u, scale, s);
    m[i] = mi;
    v[i] = vi;
    params[i] = p;
    if (compute != nullptr) compute[i] = from_f<T>(p);
  }
}

// Blocks of `threads` that fit on the current device at once: a grid of that size is one wave.
template <typename Kernel>
int resident_blocks(Kernel kernel, int threads) {
  int dev = 0, sms = 0, per_sm = 0;
  RY_CUDA(cudaGetDevice(&dev));
  RY_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  RY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  return sms * per_sm;
}

}  // namespace railyard::cuda
