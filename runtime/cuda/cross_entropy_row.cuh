#pragma once
// One softmax cross-entropy row, piece by piece, shared by cross_entropy_kernels.cu's two loss
// kernels (rows staged and rows read twice): the online (max, sum of exponentials) over 16-byte
// packs, or the max first and each exponential once, stored over the staged row; the block's
// fixed-order combination of the threads' pairs into the row's loss; and the gradient of a pack,
// from the logits or from the stored exponentials. Every sum runs in an order fixed by the
// block's shape: the same bits run to run.

#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

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

// dscale * (softmax - onehot) for the pack's columns from prob(g), which fills g[k] with the
// column's softmax times dscale for every k; 0 for padding and ignored rows. The per-column tests
// (padding, the target) only in the few packs that need them.
template <typename T, typename Prob>
__device__ __forceinline__ Pack<T> gradient_with(const Prob& prob, int j0, int V, int tgt,
                                                 float dscale) {
  constexpr int kN = Pack<T>::kN;
  const int n = tgt < 0 ? 0 : min(kN, V - j0);
  float g[kN];
  prob(g);
  if (n != kN) {
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      if (k >= n) g[k] = 0.0f;  // an assignment: the padding's values may be anything
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

// The gradient from the logits: Ml is the row's max times log2 e, scale = dscale / sum.
template <typename T>
__device__ __forceinline__ Pack<T> gradient(Pack<T> p, int j0, int V, int tgt, float Ml,
                                            float scale, float dscale) {
  auto prob = [&](float(&g)[Pack<T>::kN]) {
#pragma unroll
    for (int k = 0; k < Pack<T>::kN; ++k) {
      g[k] = exp2_approx(fmaf(to_f(p.v[k]), kLog2e, -Ml)) * scale;
    }
  };
  return gradient_with<T>(prob, j0, V, tgt, dscale);
}

// The same with the exponentials two at a time in fp16 (ex2.approx.f16x2, relative error
// 2^-9.9; the argument rounded to fp16, within 2^-12 for the columns near the max): a
// gradient stored in bf16 keeps about a unit of its last place.
__device__ __forceinline__ __half2 exp2_approx_h2(__half2 x) {
  __half2 y;
  asm("ex2.approx.f16x2 %0, %1;"
      : "=r"(*reinterpret_cast<unsigned*>(&y))
      : "r"(*reinterpret_cast<const unsigned*>(&x)));
  return y;
}
template <typename T>
__device__ __forceinline__ Pack<T> gradient_h2(Pack<T> p, int j0, int V, int tgt, float Ml,
                                               float scale, float dscale) {
  auto prob = [&](float(&g)[Pack<T>::kN]) {
#pragma unroll
    for (int k = 0; k < Pack<T>::kN; k += 2) {
      const float2 e = __half22float2(exp2_approx_h2(
          __floats2half2_rn(fmaf(to_f(p.v[k]), kLog2e, -Ml), fmaf(to_f(p.v[k + 1]), kLog2e, -Ml))));
      g[k] = e.x * scale;
      g[k + 1] = e.y * scale;
    }
  };
  return gradient_with<T>(prob, j0, V, tgt, dscale);
}

// Rows whose exponentials are computed once: each thread takes the max m of its own columns
// first, then stores 2^kExpShift exp(x - m) over each staged value (fp16 in bf16 rows: 2^15 keeps
// the exponential of every column within 20 of m a normal fp16 number, and the largest, 2^15,
// below fp16's 65504; fp32 in fp32 rows); the gradient is that value times one factor per thread.
constexpr float kExpShift = 15.0f, kExpUnshift = 1.0f / 32768.0f;  // 2^-kExpShift

// The max of the pack's columns below V (-inf for a pack of padding). bf16: two at a time.
template <typename T>
__device__ __forceinline__ float pack_max(const Pack<T>& p, int j0, int V) {
  const int n = min(Pack<T>::kN, V - j0);
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < Pack<T>::kN; ++k) {
    if (k < n) m = fmaxf(m, to_f(p.v[k]));
  }
  return m;
}
__device__ __forceinline__ float pack_max_bf16(const Pack<bf16>& p, int j0, int V) {
  if (V - j0 < Pack<bf16>::kN) return pack_max(p, j0, V);  // the last pack, or padding
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(p.v);
  const __nv_bfloat162 m2 = __hmax2(__hmax2(h[0], h[1]), __hmax2(h[2], h[3]));
  return fmaxf(__low2float(m2), __high2float(m2));
}
template <typename T>
__device__ __forceinline__ float pack_max_fast(const Pack<T>& p, int j0, int V) {
  if constexpr (std::is_same_v<T, bf16>) {
    return pack_max_bf16(p, j0, V);
  } else {
    return pack_max(p, j0, V);
  }
}

// The stored exponentials of a pack's slot: written over the slot's logits, read back as fp32.
template <typename T>
__device__ __forceinline__ void store_exps(Pack<T>& slot, const float (&e)[Pack<T>::kN]) {
  static_assert(std::is_same_v<T, float>, "fp32 slots hold fp32 exponentials");
#pragma unroll
  for (int k = 0; k < Pack<T>::kN; ++k) slot.v[k] = e[k];
}
template <>
__device__ __forceinline__ void store_exps<bf16>(Pack<bf16>& slot, const float (&e)[8]) {
  struct alignas(16) Halves {
    __half2 v[4];
  } h;
#pragma unroll
  for (int k = 0; k < 4; ++k) h.v[k] = __floats2half2_rn(e[2 * k], e[2 * k + 1]);
  *reinterpret_cast<Halves*>(&slot) = h;  // one 16-byte store
}
template <typename T>
__device__ __forceinline__ void load_exps(const Pack<T>& slot, float (&e)[Pack<T>::kN]) {
#pragma unroll
  for (int k = 0; k < Pack<T>::kN; ++k) e[k] = to_f(slot.v[k]);
}
template <>
__device__ __forceinline__ void load_exps<bf16>(const Pack<bf16>& slot, float (&e)[8]) {
  const Pack<bf16> p = slot;  // one 16-byte load
  const auto* h = reinterpret_cast<const __half2*>(p.v);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = __half22float2(h[k]);
    e[2 * k] = f.x;
    e[2 * k + 1] = f.y;
  }
}

// Replaces the slot's first n logits by 2^kExpShift exp(x - m) (ml = m log2 e - kExpShift) and
// adds them to s in column order; kWhole: n is the whole pack, and the tests compile away.
template <bool kWhole, typename T>
__device__ __forceinline__ void exps_n(Pack<T>& slot, int n, float ml, float& s) {
  constexpr int kN = Pack<T>::kN;
  const Pack<T> p = slot;
  float e[kN];
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    e[k] = kWhole || k < n ? exp2_approx(fmaf(to_f(p.v[k]), kLog2e, -ml)) : 0.0f;
    s += e[k];
  }
  store_exps<T>(slot, e);
}
template <typename T>
__device__ __forceinline__ void exps_once(Pack<T>& slot, int j0, int V, float ml, float& s) {
  const int n = min(Pack<T>::kN, V - j0);
  if (n == Pack<T>::kN) {
    exps_n<true>(slot, n, ml, s);
  } else if (n > 0) {
    exps_n<false>(slot, n, ml, s);
  }
}

// The gradient from a slot of stored exponentials: factor = 2^-kExpShift exp(m - row max)
// dscale / sum for the thread that stored them.
template <typename T>
__device__ __forceinline__ Pack<T> gradient_stored(const Pack<T>& slot, int j0, int V, int tgt,
                                                   float factor, float dscale) {
  auto prob = [&](float(&g)[Pack<T>::kN]) {
    load_exps<T>(slot, g);
#pragma unroll
    for (int k = 0; k < Pack<T>::kN; ++k) g[k] *= factor;
  };
  return gradient_with<T>(prob, j0, V, tgt, dscale);
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
