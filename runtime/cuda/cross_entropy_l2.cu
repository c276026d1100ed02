// The loss with its gradient, rows read twice with L2 keeping them in between
// (CrossEntropyStaged::kL2Pair and kL2Wide). No shared memory and no copy groups: each thread
// keeps several 16-byte loads of the row in flight at every point of the sums, the row's lines
// marked evict-last; the gradient's pass reads them again from L2 (evict-first, the last use)
// and writes the gradient evict-first. A multiprocessor holds 2 rows of 512 threads or 1 of 1024
// (26 or 13 MB of rows in the 50 MB L2 at once): device memory is read once per row as in the
// staged kernel, with no staging phases to line up.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "async_copy.cuh"
#include "cross_entropy_row.cuh"
#include "cross_entropy_variants.hpp"
#include "cuda_check.hpp"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

// 16 bytes from device memory with an L2 policy. volatile: each of the two reads of a pack is
// issued where it is written, not merged or moved by the compiler.
template <typename T>
__device__ __forceinline__ Pack<T> load_pack_hinted(const T* p, unsigned long long policy) {
  Pack<T> v;
  uint4& u = reinterpret_cast<uint4&>(v);
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(__cvta_generic_to_global(p)), "l"(policy));
  return v;
}
template <typename T>
__device__ __forceinline__ void store_pack_hinted(T* p, const Pack<T>& v,
                                                  unsigned long long policy) {
  const uint4& u = reinterpret_cast<const uint4&>(v);
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(
                   __cvta_generic_to_global(p)),
               "r"(u.x), "r"(u.y), "r"(u.z), "r"(u.w), "l"(policy)
               : "memory");
}

// Loads per thread issued before the first is used, from device memory: 6 (96 KB a
// multiprocessor; 7 spills bf16 rows at 64 registers); from L2 (shorter latency) 4, so that the
// gradient's arithmetic fits too. A row of GPT-2 is 6288 bf16 packs: about 6 a thread in 1024.
constexpr int kInFlight = 6, kRereadInFlight = 4;

// Packs q0 + u * kThreads below `packs` into p[u], every load issued before any is used.
template <int kThreads, int kCount, typename T>
__device__ __forceinline__ void load_group(Pack<T> (&p)[kCount], const T* x, int q0, int packs,
                                           unsigned long long policy) {
#pragma unroll
  for (int u = 0; u < kCount; ++u) {
    const int q = q0 + u * kThreads;
    if (q < packs) p[u] = load_pack_hinted(x + q * Pack<T>::kN, policy);
  }
}

// Persistent: block b takes rows b, b + gridDim.x, ... Each thread sums its packs q = threadIdx.x
// + r * kThreads in increasing r, as the staged kernel does: with 512 threads its bits.
template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads, 1024 / kThreads)
    cross_entropy_l2_kernel(T* logits, float* losses, const int32_t* targets, int N, int V, int Vp,
                            float dscale) {
  constexpr int kN = Pack<T>::kN, kStep = kInFlight * kThreads;
  const unsigned long long keep = evict_last_policy(), drop = evict_first_policy();
  const int packs = Vp / kN;
  for (int n = blockIdx.x; n < N; n += gridDim.x) {
    T* x = logits + size_t(n) * Vp;
    const int tgt = targets[n];
    const float target_logit = threadIdx.x == 0 && tgt >= 0 ? to_f(x[tgt]) : 0.0f;
    float m = -INFINITY, s = 0.0f;
    for (int q0 = threadIdx.x; q0 < packs; q0 += kStep) {
      Pack<T> p[kInFlight] = {};
      load_group<kThreads>(p, x, q0, packs, keep);
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        if (q0 + u * kThreads < packs) accumulate(m, s, p[u], (q0 + u * kThreads) * kN, V);
      }
    }
    const float2 r = finish_row(m, s, losses + n, target_logit, tgt);
    for (int q0 = threadIdx.x; q0 < packs; q0 += kRereadInFlight * kThreads) {
      Pack<T> p[kRereadInFlight] = {};
      load_group<kThreads>(p, x, q0, packs, drop);
#pragma unroll
      for (int u = 0; u < kRereadInFlight; ++u) {
        const int q = q0 + u * kThreads;
        if (q < packs) {
          store_pack_hinted(x + q * kN, gradient(p[u], q * kN, V, tgt, r.x, r.y * dscale, dscale),
                            drop);
        }
      }
    }
  }
}

template <typename T, int kThreads>
void launch(T* logits, float* losses, const int32_t* targets, int N, int V, int Vp, float dscale,
            cudaStream_t stream) {
  int dev = 0, sms = 0, fit = 0;
  RY_CUDA(cudaGetDevice(&dev));
  RY_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  RY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, cross_entropy_l2_kernel<T, kThreads>,
                                                        kThreads, 0));
  // At most 1024 threads' rows a multiprocessor: more rows in flight would not fit L2.
  const int grid = std::min(N, std::max(1, std::min(fit, 1024 / kThreads)) * sms);
  cross_entropy_l2_kernel<T, kThreads>
      <<<grid, kThreads, 0, stream>>>(logits, losses, targets, N, V, Vp, dscale);
  RY_CUDA_LAUNCHED();
}

}  // namespace

template <typename T>
void cross_entropy_l2(int threads, T* logits, float* losses, const int32_t* targets, int N, int V,
                      int Vp, float dscale, cudaStream_t stream) {
  if (threads == 512) return launch<T, 512>(logits, losses, targets, N, V, Vp, dscale, stream);
  if (threads == 1024) return launch<T, 1024>(logits, losses, targets, N, V, Vp, dscale, stream);
  throw std::invalid_argument("cross-entropy: blocks of " + std::to_string(threads) +
                              " threads are not built for the L2 variant: use 512 or 1024");
}

template void cross_entropy_l2<float>(int, float*, float*, const int32_t*, int, int, int, float,
                                      cudaStream_t);
template void cross_entropy_l2<bf16>(int, bf16*, float*, const int32_t*, int, int, int, float,
                                     cudaStream_t);

}  // namespace railyard::cuda
