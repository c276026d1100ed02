#include <cmath>

#include "cross_entropy_kernels.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

constexpr int kThreads = 512;

// (max, sum of exp(x - max)) pairs combine associatively; an empty pair is (-inf, 0).
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  float M = fmaxf(m, m2);
  if (M == -INFINITY) return;
  s = s * expf(m - M) + s2 * expf(m2 - M);
  m = M;
}

constexpr float kLog2e = 1.4426950408889634f;

// 2^x in one MUFU instruction: the pass over 50k columns a row is bound by instruction issue, so
// each exponential is one FFMA (x log2 e - max log2 e) and this.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Online (max, sum of exp) over the pack's columns below V: at most one rescale per pack.
template <typename T>
__device__ __forceinline__ void accumulate(float& m, float& s, const Pack<T>& p, int j0, int V) {
  constexpr int kN = Pack<T>::kN;
  const int n = min(kN, V - j0);  // kN but in the last pack before the padding
  float pm = -INFINITY;
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    if (k < n) pm = fmaxf(pm, to_f(p.v[k]));
  }
  if (pm > m) {
    s *= exp2_approx((m - pm) * kLog2e);
    m = pm;
  }
  const float ml = m * kLog2e;
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    if (k < n) s += exp2_approx(fmaf(to_f(p.v[k]), kLog2e, -ml));
  }
}

// dscale * (softmax - onehot) for the pack's columns; 0 for padding and ignored rows. Ml is the
// row's max times log2 e, scale = dscale / sum.
template <typename T>
__device__ __forceinline__ Pack<T> gradient(Pack<T> p, int j0, int V, int tgt, float Ml,
                                            float scale, float dscale) {
  constexpr int kN = Pack<T>::kN;
  const int n = tgt < 0 ? 0 : min(kN, V - j0);
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    float g = k < n ? exp2_approx(fmaf(to_f(p.v[k]), kLog2e, -Ml)) * scale : 0.0f;
    if (j0 + k == tgt) g -= dscale;
    p.v[k] = from_f<T>(g);
  }
  return p;
}

// The row's (max, sum) from every thread's pair; thread 0 writes the loss. Returns (max log2 e,
// 1/sum).
__device__ __forceinline__ float2 finish_row(float m, float s, float* losses, float target_logit,
                                             int tgt) {
  __shared__ float sm[32], ss[32];
  __shared__ float row_max, row_sum;
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    combine(m, s, m2, s2);
  }
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float M = sm[0], S = ss[0];
    for (int w = 1; w < int(blockDim.x / 32); ++w) combine(M, S, sm[w], ss[w]);
    row_max = M;
    row_sum = S;
    losses[blockIdx.x] = tgt < 0 ? 0.0f : logf(S) + M - target_logit;
  }
  __syncthreads();
  return make_float2(row_max * kLog2e, 1.0f / row_sum);
}

// One block per row, 16-byte packs (Vp is a multiple of 8); the padding columns [V, Vp) are
// skipped in the sums and get gradient 0. The row is read twice (for rows too long to stage).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(T* logits, float* losses, const int32_t* targets, int V, int Vp,
                         float dscale, bool write_grad) {
  constexpr int kN = Pack<T>::kN;
  T* x = logits + size_t(blockIdx.x) * Vp;
  const int tgt = targets[blockIdx.x];
  float m = -INFINITY, s = 0.0f;
  for (int j0 = threadIdx.x * kN; j0 < V; j0 += blockDim.x * kN) {
    accumulate(m, s, load_pack(x + j0), j0, V);
  }
  const float2 r = finish_row(m, s, losses, tgt < 0 ? 0.0f : to_f(x[tgt]), tgt);
  if (!write_grad) return;
  for (int j0 = threadIdx.x * kN; j0 < Vp; j0 += blockDim.x * kN) {
    store_pack(x + j0, gradient(load_pack(x + j0), j0, V, tgt, r.x, r.y * dscale, dscale));
  }
}

// The same with the row staged in shared memory (Vp / kN packs), so it is read from device
// memory once: a bf16 row of GPT-2's 50304 columns takes 98 KiB, two blocks per multiprocessor.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_staged_kernel(T* logits, float* losses, const int32_t* targets, int V, int Vp,
                                float dscale, bool write_grad) {
  constexpr int kN = Pack<T>::kN;
  extern __shared__ __align__(16) unsigned char staged[];
  Pack<T>* row = reinterpret_cast<Pack<T>*>(staged);
  T* x = logits + size_t(blockIdx.x) * Vp;
  const int tgt = targets[blockIdx.x], packs = Vp / kN;
  float m = -INFINITY, s = 0.0f;
#pragma unroll 4
  for (int q = threadIdx.x; q < packs; q += blockDim.x) {
    Pack<T> p = load_pack(x + q * kN);
    row[q] = p;  // read back below by this same thread only
    accumulate(m, s, p, q * kN, V);
  }
  const float2 r = finish_row(m, s, losses, tgt < 0 ? 0.0f : to_f(x[tgt]), tgt);
  if (!write_grad) return;
  for (int q = threadIdx.x; q < packs; q += blockDim.x) {
    store_pack(x + q * kN, gradient(row[q], q * kN, V, tgt, r.x, r.y * dscale, dscale));
  }
}

// Staging pays while two blocks still fit a multiprocessor (228 KiB of shared memory on H100
// and H200).
constexpr size_t kMaxStagedBytes = 112 * 1024;

}  // namespace

template <typename T>
void cross_entropy_forward_backward(T* logits, float* losses, const int32_t* targets, int N, int V,
                                    int Vp, float dscale, bool write_grad, cudaStream_t stream) {
  const size_t row_bytes = size_t(Vp) * sizeof(T);
  if (row_bytes <= kMaxStagedBytes) {
    if (row_bytes > 48 * 1024) {
      RY_CUDA(cudaFuncSetAttribute(cross_entropy_staged_kernel<T>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(row_bytes)));
    }
    cross_entropy_staged_kernel<T>
        <<<N, kThreads, row_bytes, stream>>>(logits, losses, targets, V, Vp, dscale, write_grad);
  } else {
    cross_entropy_kernel<T>
        <<<N, kThreads, 0, stream>>>(logits, losses, targets, V, Vp, dscale, write_grad);
  }
  RY_CUDA_LAUNCHED();
}

template void cross_entropy_forward_backward<float>(float*, float*, const int32_t*, int, int, int,
                                                    float, bool, cudaStream_t);
template void cross_entropy_forward_backward<bf16>(bf16*, float*, const int32_t*, int, int, int,
                                                   float, bool, cudaStream_t);

}  // namespace railyard::cuda
