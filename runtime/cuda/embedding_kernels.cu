#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "embedding_kernels.hpp"

namespace railyard::cuda {

namespace {

// One thread per 16 bytes of the output row (Pack<T>): the gather reads whole vectors.
template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe,
                                         int Tn, int C, size_t packs) {
  constexpr int kN = Pack<T>::kN;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < packs;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t e = i * kN, row = e / C;
    const int c = static_cast<int>(e % C);
    const int t = static_cast<int>(row % Tn);
    const Pack<T> a = load_pack(wte + size_t(tokens[row]) * C + c);
    const Pack<T> b = load_pack(wpe + size_t(t) * C + c);
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < kN; ++k) o.v[k] = from_f<T>(to_f(a.v[k]) + to_f(b.v[k]));
    store_pack(out + e, o);
  }
}

constexpr int kBlockWarps = 8;  // at most, per block of the wte backward: whole entries each
// Rows loaded before their sums, in order, are taken: of one token's run (at 4, the wte kernel
// needs 78 registers, three blocks per multiprocessor), of the batch for dwpe (its threads are
// one wave).
constexpr int kRunRowsInFlight = 4, kBatchRowsInFlight = 8;

// The end of the run of `tok` that starts at sorted entry i: the warp compares 32 keys at once.
__device__ int run_end(const uint32_t* keys, uint32_t tok, int i, int N) {
  const int lane = threadIdx.x % 32;
  int end = i + 1;
  for (;;) {
    const int k = end + lane;
    const unsigned same = __ballot_sync(0xffffffffu, k < N && keys[k] == tok);
    if (same != 0xffffffffu) return end + __ffs(~same) - 1;
    end += 32;
  }
}

// Each sorted entry has `warps` warps (one pack of 16 bytes per thread up to 8 warps' packs, C =
// 2048 in bf16; wider rows loop); the entry that starts a run of equal tokens adds the run's rows
// of dout (ascending positions: the sort is stable) and then adds that sum to the token's row. A
// pack's sum is taken row by row from zero, kRunRowsInFlight rows loaded at a time, and the token's
// row is read before the sum: the order, and so the bits, of the block-per-entry kernel this
// replaced, whose 16384 blocks of 128 threads mostly returned at once.
template <typename T>
__global__ void __launch_bounds__(kBlockWarps * 32, 3)
    embedding_wte_backward_kernel(float* dwte, const T* dout, const uint32_t* keys,
                                  const uint32_t* pos, int N, int C, int warps) {
  constexpr int kN = Pack<T>::kN;
  const int warp = threadIdx.x / 32, entries = blockDim.x / 32 / warps;
  const int i = blockIdx.x * entries + warp / warps;
  if (i >= N) return;  // whole warps
  const uint32_t tok = keys[i];
  if (i > 0 && keys[i - 1] == tok) return;  // the same for the whole warp
  const int end = run_end(keys, tok, i, N), packs = C / kN;
  for (int q = (warp % warps) * 32 + threadIdx.x % 32; q < packs; q += warps * 32) {
    float4* row = reinterpret_cast<float4*>(dwte + size_t(tok) * C + q * kN);
    float4 old[kN / 4];
#pragma unroll
    for (int h = 0; h < kN / 4; ++h) old[h] = row[h];
    float s[kN] = {};
    for (int j = i; j < end; j += kRunRowsInFlight) {
      Pack<T> v[kRunRowsInFlight];
#pragma unroll
      for (int u = 0; u < kRunRowsInFlight; ++u) {
        if (j + u < end) v[u] = load_pack(dout + size_t(pos[j + u]) * C + q * kN);
      }
#pragma unroll
      for (int u = 0; u < kRunRowsInFlight; ++u) {
        if (j + u >= end) break;
#pragma unroll
        for (int k = 0; k < kN; ++k) s[k] += to_f(v[u].v[k]);
      }
    }
#pragma unroll
    for (int h = 0; h < kN / 4; ++h) {
      row[h] = make_float4(old[h].x + s[4 * h], old[h].y + s[4 * h + 1], old[h].z + s[4 * h + 2],
                           old[h].w + s[4 * h + 3]);
    }
  }
}

// One thread per (t, pack of columns): the sum over the batch, in batch order, needs no atomics;
// kBatchRowsInFlight rows are loaded before they are added.
template <typename T>
__global__ void embedding_wpe_backward_kernel(float* dwpe, const T* dout, int B, int Tn, int C,
                                              bool accumulate) {
  constexpr int kN = Pack<T>::kN;
  const size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * kN, tc = size_t(Tn) * C;
  if (i >= tc) return;
  float s[kN] = {};
  for (int b = 0; b < B; b += kBatchRowsInFlight) {
    Pack<T> v[kBatchRowsInFlight];
#pragma unroll
    for (int u = 0; u < kBatchRowsInFlight; ++u) {
      if (b + u < B) v[u] = load_pack(dout + size_t(b + u) * tc + i);
    }
#pragma unroll
    for (int u = 0; u < kBatchRowsInFlight; ++u) {
      if (b + u >= B) break;
#pragma unroll
      for (int k = 0; k < kN; ++k) s[k] += to_f(v[u].v[k]);
    }
  }
  float4* out = reinterpret_cast<float4*>(dwpe + i);
#pragma unroll
  for (int h = 0; h < kN / 4; ++h) {
    float4 o = make_float4(s[4 * h], s[4 * h + 1], s[4 * h + 2], s[4 * h + 3]);
    if (accumulate) {
      const float4 a = out[h];
      o = make_float4(a.x + o.x, a.y + o.y, a.z + o.z, a.w + o.w);
    }
    out[h] = o;
  }
}

int blocks_for(size_t n, int threads) {
  size_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65536 ? b : 65536);
}

// Warps per sorted entry: one pack per thread where the row fits a block, whole entries per
// block.
template <typename T>
void launch_wte_backward(float* dwte, const T* dout, const uint32_t* keys, const uint32_t* pos,
                         int N, int C, cudaStream_t stream) {
  const int warps = std::min((C / Pack<T>::kN + 31) / 32, kBlockWarps);
  const int entries = kBlockWarps / warps, blocks = (N + entries - 1) / entries;
  embedding_wte_backward_kernel<<<blocks, entries * warps * 32, 0, stream>>>(dwte, dout, keys, pos,
                                                                             N, C, warps);
  RY_CUDA_LAUNCHED();
}

// The kernels move 16-byte vectors (Pack<T>): a row must hold whole ones.
template <typename T>
void require_whole_packs(const char* caller, int C) {
  if (C % Pack<T>::kN != 0) {
    throw std::invalid_argument(std::string(caller) + ": dim " + std::to_string(C) +
                                " is not a multiple of " + std::to_string(Pack<T>::kN) +
                                " (the kernels move 16-byte vectors): use a --dim that is a "
                                "multiple of 8");
  }
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C, cudaStream_t stream) {
  constexpr int kN = Pack<T>::kN;
  require_whole_packs<T>("embedding_forward", C);
  const size_t packs = size_t(B) * Tn * C / kN;
  embedding_forward_kernel<<<blocks_for(packs, 256), 256, 0, stream>>>(out, tokens, wte, wpe, Tn, C,
                                                                       packs);
  RY_CUDA_LAUNCHED();
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const uint32_t* sorted_tokens,
                        const uint32_t* sorted_positions, int B, int Tn, int C, bool accumulate_wpe,
                        cudaStream_t stream) {
  require_whole_packs<T>("embedding_backward", C);
  launch_wte_backward(dwte, dout, sorted_tokens, sorted_positions, B * Tn, C, stream);
  const size_t pack_threads = size_t(Tn) * C / Pack<T>::kN;
  embedding_wpe_backward_kernel<<<static_cast<int>((pack_threads + 255) / 256), 256, 0, stream>>>(
      dwpe, dout, B, Tn, C, accumulate_wpe);
  RY_CUDA_LAUNCHED();
}

#define RY_INSTANTIATE(T)                                                                         \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int,       \
                                     cudaStream_t);                                               \
  template void embedding_backward<T>(float*, float*, const T*, const uint32_t*, const uint32_t*, \
                                      int, int, int, bool, cudaStream_t);
RY_INSTANTIATE(float)
RY_INSTANTIATE(bf16)
#undef RY_INSTANTIATE

}  // namespace railyard::cuda
