#pragma once
// One softmax cross-entropy row, piece by piece, shared by cross_entropy_kernels.cu's two loss
// kernels (rows staged and rows read twice): the online (max, sum of exponentials) over 16-byte
// packs, the block's fixed-order combination of the threads' pairs into the row's loss, and the
// gradient of a pack. Every sum runs in an order fixed by the block's shape: the same bits run to
// run.

#include <cmath>

#include "device_math.cuh"
#include "dtype.hpp"

namespace railyard::cuda {

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

// Online (max, sum of exp) over the pack's first n columns: at most one rescale per pack.
// kWhole: n is the whole pack, and the per-column tests compile away.
template <bool kWhole, typename T>
__device__ __forceinline__ void accumulate_n(float& m, float& s, const Pack<T>& p, int n) {
  constexpr int kN = Pack<T>::kN;
  float pm = -INFINITY;
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    if (kWhole || k < n) pm = fmaxf(pm, to_f(p.v[k]));
  }
  if (pm > m) {
    s *= exp2_approx((m - pm) * kLog2e);
    m = pm;
  }
  const float ml = m * kLog2e;
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    if (kWhole || k < n) s += exp2_approx(fmaf(to_f(p.v[k]), kLog2e, -ml));
  }
}

// The same over the pack's columns below V.
template <typename T>
__device__ __forceinline__ void accumulate(float& m, float& s, const Pack<T>& p, int j0, int V) {
  constexpr int kN = Pack<T>::kN;
  const int n = min(kN, V - j0);  // kN but in the last pack before the padding
  if (n == kN) {
    accumulate_n<true>(m, s, p, n);
  } else {
    accumulate_n<false>(m, s, p, n);
  }
}

// A pack from fp32 values, rounded to nearest even. bf16 two at a time: one conversion
// instruction per pair instead of one per element and a merge.
template <typename T>
__device__ __forceinline__ Pack<T> to_pack(const float (&g)[Pack<T>::kN]) {
  Pack<T> p;
#pragma unroll
  for (int k = 0; k < Pack<T>::kN; ++k) p.v[k] = from_f<T>(g[k]);
  return p;
}
template <>
__device__ __forceinline__ Pack<bf16> to_pack<bf16>(const float (&g)[Pack<bf16>::kN]) {
  Pack<bf16> p;
  auto* pairs = reinterpret_cast<__nv_bfloat162*>(p.v);
#pragma unroll
  for (int k = 0; k < Pack<bf16>::kN / 2; ++k)
    pairs[k] = __floats2bfloat162_rn(g[2 * k], g[2 * k + 1]);
  return p;
}

// dscale * (softmax - onehot) for the pack's columns; 0 for padding and ignored rows. Ml is the
// row's max times log2 e, scale = dscale / sum. The per-column tests (padding, the target) only
// in the few packs that need them.
template <typename T>
__device__ __forceinline__ Pack<T> gradient(Pack<T> p, int j0, int V, int tgt, float Ml,
                                            float scale, float dscale) {
  constexpr int kN = Pack<T>::kN;
  const int n = tgt < 0 ? 0 : min(kN, V - j0);
  float g[kN];
  if (n == kN) {
#pragma unroll
    for (int k = 0; k < kN; ++k) g[k] = exp2_approx(fmaf(to_f(p.v[k]), kLog2e, -Ml)) * scale;
  } else {
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      g[k] = k < n ? exp2_approx(fmaf(to_f(p.v[k]), kLog2e, -Ml)) * scale : 0.0f;
    }
  }
  if (unsigned(tgt - j0) < unsigned(kN)) {  // the target's pack (never for tgt < 0)
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      if (j0 + k == tgt) g[k] -= dscale;
    }
  }
  return to_pack<T>(g);
}

// The row's (max, sum) from every thread's pair; thread 0 writes the row's loss (target_logit is
// needed in thread 0 only). Returns (max log2 e, 1/sum). Both levels combine in a fixed shuffle
// tree (the warps' pairs in warp 0: no serial loop over 32 warps in one thread). The shared slots
// are reused row after row: each is written before one barrier and read before the next.
__device__ __forceinline__ void warp_combine(float& m, float& s) {
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    combine(m, s, m2, s2);
  }
}
__device__ __forceinline__ float2 finish_row(float m, float s, float* loss, float target_logit,
                                             int tgt) {
  __shared__ float sm[32], ss[32];
  __shared__ float row_max, row_sum;
  warp_combine(m, s);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    const bool has = lane < int(blockDim.x / 32);
    float M = has ? sm[lane] : -INFINITY, S = has ? ss[lane] : 0.0f;
    warp_combine(M, S);
    if (lane == 0) {
      row_max = M;
      row_sum = S;
      *loss = tgt < 0 ? 0.0f : logf(S) + M - target_logit;
    }
  }
  __syncthreads();
  return make_float2(row_max * kLog2e, 1.0f / row_sum);
}

}  // namespace railyard::cuda
