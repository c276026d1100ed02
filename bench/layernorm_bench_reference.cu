// The kernels of layernorm_bench_reference.hpp: copied from runtime/cuda (LayerNorm at 289da3f,
// embedding at 2f880da), unchanged but for names and the launchers narrowed to what the bench
// runs.
#include <cub/device/device_radix_sort.cuh>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "layernorm_bench_reference.hpp"

namespace railyard::bench {

using cuda::from_f;
using cuda::load_pack;
using cuda::Pack;
using cuda::prefetch_l2;
using cuda::store_pack;
using cuda::to_f;
using cuda::warp_sum;

namespace {

constexpr int kWarps = 8;
constexpr int kMaxBackwardBlocks = 396;

// layernorm_backward_packed_kernel at 289da3f (issue 12's first attempt): float4 slices of
// shared memory per warp, the warp's next row prefetched to L2.
template <typename T, int P, bool kSum>
__global__ void __launch_bounds__(kWarps * 32, 3)
    old_layernorm_backward_kernel(T* dx, float* partials, const T* dy, const T* x, const T* w,
                                  const float* mean, const float* rstd, int N, int C,
                                  bool accumulate) {
  constexpr int kN = Pack<T>::kN, kGroups = P * kN / 4, kParts = kSum ? 3 : 2;
  static_assert(kN % 4 == 0, "a pack holds whole groups of 4 accumulators");
  extern __shared__ float4 acc4[];  // [kWarps][part][kGroups][32 lanes] float4
  const int lane = threadIdx.x % 32, packs = C / kN;
  // The warp's own slice; each lane only ever touches its own float4s, so no barrier is needed
  // until the block adds the slices.
  float4* adw = acc4 + (threadIdx.x / 32) * kParts * kGroups * 32 + lane;
  float4* adb = adw + kGroups * 32;
  float4* ads = adb + kGroups * 32;  // used only with kSum
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    adw[g * 32] = adb[g * 32] = zero;
    if (kSum) ads[g * 32] = zero;
  }
  for (int row = blockIdx.x * kWarps + threadIdx.x / 32; row < N; row += gridDim.x * kWarps) {
    // The warp's next row on its way to L2 while this one is summed: its loads then wait for
    // L2, not device memory, at no cost in registers.
    const int next = row + gridDim.x * kWarps;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int q = lane + 32 * i;
      if (next < N && q < packs) {
        prefetch_l2(dy + size_t(next) * C + q * kN);
        prefetch_l2(x + size_t(next) * C + q * kN);
        if (accumulate) prefetch_l2(dx + size_t(next) * C + q * kN);
      }
    }
    const float m = mean[row], r = rstd[row];
    Pack<T> pd[P], px[P];
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      int q = lane + 32 * i;
      if (q < packs) {
        pd[i] = load_pack(dy + size_t(row) * C + q * kN);
        px[i] = load_pack(x + size_t(row) * C + q * kN);
        Pack<T> pw = load_pack(w + q * kN);
#pragma unroll
        for (int h = 0; h < kN / 4; ++h) {
          float4 aw = adw[(i * kN / 4 + h) * 32], ab = adb[(i * kN / 4 + h) * 32];
          float* fw = &aw.x;
          float* fb = &ab.x;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int k = h * 4 + j;
            float d = to_f(pd[i].v[k]), xh = (to_f(px[i].v[k]) - m) * r;
            float g = d * to_f(pw.v[k]);
            s1 += g;
            s2 += g * xh;
            fw[j] += d * xh;
            fb[j] += d;
          }
          adw[(i * kN / 4 + h) * 32] = aw;
          adb[(i * kN / 4 + h) * 32] = ab;
        }
      }
    }
    s1 = warp_sum(s1) / C;
    s2 = warp_sum(s2) / C;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      int q = lane + 32 * i;
      if (q < packs) {
        T* dxp = dx + size_t(row) * C + q * kN;
        Pack<T> pw = load_pack(w + q * kN), out;
        if (accumulate) out = load_pack(dxp);
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          float d = to_f(pd[i].v[k]), xh = (to_f(px[i].v[k]) - m) * r;
          float g = r * (d * to_f(pw.v[k]) - s1 - xh * s2);
          out.v[k] = from_f<T>(accumulate ? to_f(out.v[k]) + g : g);
        }
        if (kSum) {  // the values stored, as a bias gradient reads them
#pragma unroll
          for (int h = 0; h < kN / 4; ++h) {
            float4 as = ads[(i * kN / 4 + h) * 32];
            float* fs = &as.x;
#pragma unroll
            for (int j = 0; j < 4; ++j) fs[j] += to_f(out.v[h * 4 + j]);
            ads[(i * kN / 4 + h) * 32] = as;
          }
        }
        store_pack(dxp, out);
      }
    }
  }
  // The block's row of partials in column order: column c = q kN + k of dw (db, dx sums) is
  // element e = (q / 32) kN + k of lane q % 32, float e % 4 of its group e / 4.
  __syncthreads();
  const float* acc = reinterpret_cast<const float*>(acc4);
  float* out = partials + size_t(blockIdx.x) * kParts * C;
  for (int c = threadIdx.x; c < kParts * C; c += blockDim.x) {
    const int part = c / C, col = c - part * C, q = col / kN, e = (q / 32) * kN + col % kN;
    const int slot = (part * kGroups + e / 4) * 128 + (q % 32) * 4 + e % 4;
    float t = 0.0f;
    for (int k = 0; k < kWarps; ++k) t += acc[k * kParts * kGroups * 128 + slot];
    out[c] = t;
  }
}

template <int P, bool kSum>
void launch_old(__nv_bfloat16* dx, float* partials, const __nv_bfloat16* dy, const __nv_bfloat16* x,
                const __nv_bfloat16* w, const float* mean, const float* rstd, int N, int C,
                bool accumulate, cudaStream_t stream) {
  auto kernel = old_layernorm_backward_kernel<__nv_bfloat16, P, kSum>;
  const size_t smem = size_t(kWarps) * (kSum ? 3 : 2) * P * 32 * 8 * sizeof(float);
  if (smem > 48 * 1024) {
    RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
    RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
  }
  int blocks = (N + kWarps - 1) / kWarps;
  blocks = blocks < kMaxBackwardBlocks ? blocks : kMaxBackwardBlocks;
  kernel<<<blocks, kWarps * 32, smem, stream>>>(dx, partials, dy, x, w, mean, rstd, N, C,
                                                accumulate);
  RY_CUDA_LAUNCHED();
}

template <typename T>
__global__ void old_wte_backward_kernel(float* dwte, const T* dout, const uint32_t* keys,
                                        const uint32_t* pos, int N, int C) {
  const int i = blockIdx.x;
  const uint32_t tok = keys[i];
  if (i > 0 && keys[i - 1] == tok) return;
  int end = i + 1;
  while (end < N && keys[end] == tok) ++end;
  constexpr int kN = Pack<T>::kN;
  for (int q = threadIdx.x; q < C / kN; q += blockDim.x) {
    float s[kN] = {};
    for (int j = i; j < end; ++j) {
      Pack<T> p = load_pack(dout + size_t(pos[j]) * C + q * kN);
#pragma unroll
      for (int k = 0; k < kN; ++k) s[k] += to_f(p.v[k]);
    }
    float* row = dwte + size_t(tok) * C + q * kN;
#pragma unroll
    for (int k = 0; k < kN; ++k) row[k] += s[k];
  }
}

template <typename T>
__global__ void old_wpe_backward_kernel(float* dwpe, const T* dout, int B, int Tn, int C,
                                        bool accumulate) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(Tn) * C) return;
  float s = 0.0f;
  for (int b = 0; b < B; ++b) s += to_f(dout[size_t(b) * Tn * C + i]);
  dwpe[i] = accumulate ? dwpe[i] + s : s;
}

__global__ void iota_kernel(uint32_t* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<uint32_t>(i);
}

size_t align256(size_t n) {
  return (n + 255) / 256 * 256;
}

int key_bits(int vocab) {
  int bits = 1;
  while (bits < 32 && (uint32_t(1) << bits) < uint32_t(vocab)) ++bits;
  return bits;
}

size_t sort_temp_bytes(int N, int vocab) {
  size_t bytes = 0;
  RY_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                          static_cast<uint32_t*>(nullptr),
                                          static_cast<const uint32_t*>(nullptr),
                                          static_cast<uint32_t*>(nullptr), N, 0, key_bits(vocab)));
  return bytes;
}

// Positions, sorted keys, sorted positions, CUB's temporary storage.
uint32_t* part(void* scratch, int N, int k) {
  return reinterpret_cast<uint32_t*>(static_cast<char*>(scratch) +
                                     k * align256(size_t(N) * sizeof(uint32_t)));
}

}  // namespace

void reference_layernorm_backward_first_pass(__nv_bfloat16* dx, float* partials,
                                             const __nv_bfloat16* dy, const __nv_bfloat16* x,
                                             const __nv_bfloat16* w, const float* mean,
                                             const float* rstd, int N, int C, bool accumulate,
                                             bool sum, cudaStream_t stream) {
  const int lane_packs = (C / 8 + 31) / 32;
  if (C % 8 != 0 || lane_packs > 4 || lane_packs < 1) {
    throw std::invalid_argument("reference LayerNorm backward: C = " + std::to_string(C) +
                                ": the bench's copy covers multiples of 8 up to 1024");
  }
  auto run = [&](auto launch) {
    launch(dx, partials, dy, x, w, mean, rstd, N, C, accumulate, stream);
  };
  if (lane_packs == 1) {
    sum ? run(launch_old<1, true>) : run(launch_old<1, false>);
  } else if (lane_packs == 2) {
    sum ? run(launch_old<2, true>) : run(launch_old<2, false>);
  } else if (lane_packs == 3) {
    sum ? run(launch_old<3, true>) : run(launch_old<3, false>);
  } else {
    sum ? run(launch_old<4, true>) : run(launch_old<4, false>);
  }
}

size_t reference_embedding_scratch_bytes(int N, int vocab) {
  return 3 * align256(size_t(N) * sizeof(uint32_t)) + sort_temp_bytes(N, vocab);
}

void reference_embedding_sort(void* scratch, const int32_t* tokens, int N, int vocab,
                              cudaStream_t stream) {
  iota_kernel<<<(N + 255) / 256, 256, 0, stream>>>(part(scratch, N, 0), N);
  RY_CUDA_LAUNCHED();
  size_t temp_bytes = sort_temp_bytes(N, vocab);
  RY_CUDA(cub::DeviceRadixSort::SortPairs(part(scratch, N, 3), temp_bytes,
                                          reinterpret_cast<const uint32_t*>(tokens),
                                          part(scratch, N, 1), part(scratch, N, 0),
                                          part(scratch, N, 2), N, 0, key_bits(vocab), stream));
}

void reference_embedding_backward(float* dwte, float* dwpe, void* scratch,
                                  const __nv_bfloat16* dout, const int32_t* tokens, int B, int Tn,
                                  int C, int vocab, bool accumulate_wpe, cudaStream_t stream) {
  const int N = B * Tn;
  reference_embedding_sort(scratch, tokens, N, vocab, stream);
  old_wte_backward_kernel<<<N, 128, 0, stream>>>(dwte, dout, part(scratch, N, 1),
                                                 part(scratch, N, 2), N, C);
  RY_CUDA_LAUNCHED();
  size_t tc = size_t(Tn) * C;
  old_wpe_backward_kernel<<<static_cast<int>((tc + 255) / 256), 256, 0, stream>>>(
      dwpe, dout, B, Tn, C, accumulate_wpe);
  RY_CUDA_LAUNCHED();
}

}  // namespace railyard::bench
