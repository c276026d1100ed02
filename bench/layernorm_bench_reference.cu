// The kernels of layernorm_bench_reference.hpp: copied from runtime/cuda (LayerNorm at 2877015,
// embedding at 2f880da), unchanged but for names and the launchers narrowed to what the bench
// runs.
#include <algorithm>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "layernorm_bench_reference.hpp"
#include "layernorm_kernels.hpp"

namespace railyard::bench {

using cuda::from_f;
using cuda::kLayerNormEps;
using cuda::load_pack;
using cuda::Pack;
using cuda::prefetch_l2;
using cuda::store_pack;
using cuda::to_f;
using cuda::warp_sum;

namespace {

// Shared memory for one resident block of `bytes` and no more: the rest of a multiprocessor's
// 256 KB stays L1, which also stages the data of global loads in flight. (All 228 KB as shared
// memory would leave 28 KB of L1, less than the register kernel's loads in flight, a row per
// warp: 37 KB at C = 768 bf16.) The carveout is a percentage of the most shared memory a
// multiprocessor has; the system reserves some per block.
template <typename Kernel>
void fit_shared_memory(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(bytes)));
  }
  int device = 0, per_sm = 0, reserved = 0;
  RY_CUDA(cudaGetDevice(&device));
  RY_CUDA(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  RY_CUDA(cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device));
  const size_t need = bytes + size_t(reserved), total = size_t(per_sm);
  const int percent = int(std::min<size_t>(100, (need * 100 + total - 1) / total));
  RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, percent));
}

// Per-column sums the backward pass keeps: dw and db, and with the column sums of dx (kSum) a
// third, the bias gradient of the Linear layer whose output gradient dx is.
__host__ __device__ constexpr int backward_parts(bool sum) {
  return sum ? 3 : 2;
}

// The register kernel (rows of at most 4 packs per lane, C a multiple of the pack): each lane
// owns fixed columns (packs lane, lane + 32, ...; P of them) and keeps their column sums (dw,
// db, and with kSum dx's) in registers while its warp walks rows; one block per multiprocessor
// takes a contiguous run of rows, its warps every kWarps-th row of it. A warp loads its next
// row (dy, x, the old dx, mean, rstd) before it computes the current one, so that every warp
// has a row's loads in flight while it computes: memory, not latency, sets the pace. At the
// end the warps' sums meet in shared memory and are added in warp order into the block's row
// of partials: every sum has a fixed order (rows in walk order per lane, then warps, then
// blocks in sum_partial_columns), the same bits every run.
template <typename T, int P, bool kSum>
struct RegisterShape {
  static constexpr int kN = Pack<T>::kN, kH = kN / 4, kE = P * kN, kParts = backward_parts(kSum);
  static_assert(kN % 4 == 0, "a pack holds whole float4 groups");
  // Registers per thread (about): the column sums, two rows of loads as 32-bit words, 40 for
  // the rest (ptxas -v agrees within 10 at every instantiation, 232 at most: bf16, 4 packs,
  // three sums). Each quarter of a multiprocessor has 16K registers: twelve warps (three a
  // quarter) get 168 each, eight get 255.
  static constexpr int kRegs = kParts * kE + 2 * 3 * P * 4 + 40;
  static_assert(kRegs <= 240, "two rows of loads and the sums fit a thread's 255 registers");
  static constexpr int kWarps = kRegs <= 168 ? 12 : 8;
  // Shared memory: w as fp32 [P][kH][32 lanes] float4, then the sums [kWarps][part][kE / 4][32]
  // float4 (a lane's 4 adjacent sums as one float4, a warp's 32 of them consecutive: no bank
  // conflict).
  static constexpr int kW4 = P * kH * 32, kAcc4 = kWarps * kParts * (kE / 4) * 32;
  static constexpr size_t kSharedBytes = size_t(kW4 + kAcc4) * sizeof(float4);
};

// One block per multiprocessor of an H100/H200 (132): fixed, so that the order of the sums
// does not depend on the device.
constexpr int kRegisterBlocks = 132;

int register_blocks(int N, int warps) {
  return std::min(kRegisterBlocks, (N + warps - 1) / warps);
}

// A row's loads as loaded: a lane's packs of dy, x and the old dx as raw 32-bit words, and the
// row's statistics. Raw, because a Pack of bf16 is split into one register per element where
// it is loaded, twice the registers of the words; each element is widened where it is used.
template <typename T, int P>
struct RowLoads {
  uint4 dy[P], x[P], dx[P];
  float mean, rstd;
};

// Element k of a pack's words as fp32: bf16 is the high half of an fp32, so widening is a
// shift or a mask (exactly __bfloat162float).
template <typename T>
__device__ __forceinline__ float element(const uint4& p, int k) {
  const unsigned* w = &p.x;
  if constexpr (sizeof(T) == 2) {
    return __uint_as_float(k % 2 == 0 ? w[k / 2] << 16 : w[k / 2] & 0xffff0000u);
  } else {
    return __uint_as_float(w[k]);
  }
}

template <typename T, int P>
__device__ __forceinline__ void load_row(RowLoads<T, P>& b, const T* dy, const T* x, const T* dx,
                                         const float* mean, const float* rstd, int row, int C,
                                         int lane, bool accumulate) {
  constexpr int kN = Pack<T>::kN;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int q = lane + 32 * i;
    if (q < C / kN) {
      const size_t at = size_t(row) * C + size_t(q) * kN;
      // Read once: marked evict-first, so that L2 keeps what the next kernels read (dx).
      b.dy[i] = __ldcs(reinterpret_cast<const uint4*>(dy + at));
      b.x[i] = __ldcs(reinterpret_cast<const uint4*>(x + at));
      if (accumulate) b.dx[i] = *reinterpret_cast<const uint4*>(dx + at);
    }
  }
  b.mean = mean[row];
  b.rstd = rstd[row];
}

// The row after the next on its way to L2 (no registers): its loads, issued a row later, then
// wait for L2, not device memory. One lane per 128-byte line of each row.
template <typename T>
__device__ __forceinline__ void prefetch_row_l2(const T* dy, const T* x, const T* dx, int row,
                                                int C, int lane, bool accumulate) {
  const int bytes = C * int(sizeof(T));
  for (int at = lane * 128; at < bytes; at += 32 * 128) {
    const size_t off = size_t(row) * bytes + at;
    prefetch_l2(reinterpret_cast<const char*>(dy) + off);
    prefetch_l2(reinterpret_cast<const char*>(x) + off);
    if (accumulate) prefetch_l2(reinterpret_cast<const char*>(dx) + off);
  }
}

// One row: the two row sums (warp shuffles), dx stored, the lane's column sums added to.
template <typename T, int P, bool kSum>
__device__ __forceinline__ void backward_row(
    const RowLoads<T, P>& b, T* dxr, const float4* w4, int C, int lane, bool accumulate,
    float (&acc)[RegisterShape<T, P, kSum>::kParts][RegisterShape<T, P, kSum>::kE]) {
  using S = RegisterShape<T, P, kSum>;
  constexpr int kN = S::kN, kH = S::kH;
  const float m = b.mean, r = b.rstd;
  float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    if (lane + 32 * i >= C / kN) continue;
#pragma unroll
    for (int h = 0; h < kH; ++h) {
      const float4 wv = w4[(i * kH + h) * 32 + lane];
      const float* wf = &wv.x;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = h * 4 + j;
        const float d = element<T>(b.dy[i], k), xh = (element<T>(b.x[i], k) - m) * r;
        const float g = d * wf[j];
        s1 += g;
        s2 += g * xh;
        acc[0][i * kN + k] += d * xh;
        acc[1][i * kN + k] += d;
      }
    }
  }
  s1 = warp_sum(s1) / C;
  s2 = warp_sum(s2) / C;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int q = lane + 32 * i;
    if (q >= C / kN) continue;
    Pack<T> out;
#pragma unroll
    for (int h = 0; h < kH; ++h) {
      const float4 wv = w4[(i * kH + h) * 32 + lane];
      const float* wf = &wv.x;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = h * 4 + j;
        const float d = element<T>(b.dy[i], k), xh = (element<T>(b.x[i], k) - m) * r;
        const float g = r * (d * wf[j] - s1 - xh * s2);
        out.v[k] = from_f<T>(accumulate ? element<T>(b.dx[i], k) + g : g);
        if constexpr (kSum) acc[2][i * kN + k] += to_f(out.v[k]);  // as stored, as a bias reads
      }
    }
    store_pack(dxr + size_t(q) * kN, out);
  }
}

// w as fp32 in shared memory, in the layout each lane reads its float4 groups from.
template <typename T, int P>
__device__ void stage_weights(float4* w4, const T* w, int C) {
  constexpr int kN = Pack<T>::kN, kH = kN / 4;
  for (int s = threadIdx.x; s < P * kH * 32; s += blockDim.x) {
    const int i = s / (kH * 32), h = (s / 32) % kH, q = s % 32 + 32 * i;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (q < C / kN) {
      const Pack<T> p = load_pack(w + size_t(q) * kN);
      v = make_float4(to_f(p.v[h * 4]), to_f(p.v[h * 4 + 1]), to_f(p.v[h * 4 + 2]),
                      to_f(p.v[h * 4 + 3]));
    }
    w4[s] = v;
  }
}

// The warps' column sums added in warp order: the block's row of partials, in column order
// (column c = q kN + k of a part is element e = (q / 32) kN + k of lane q % 32).
template <typename T, int P, bool kSum>
__device__ void write_register_partials(
    float* partials, float4* acc4, int C,
    const float (&acc)[RegisterShape<T, P, kSum>::kParts][RegisterShape<T, P, kSum>::kE]) {
  using S = RegisterShape<T, P, kSum>;
  constexpr int kN = S::kN, kG = S::kE / 4, kParts = S::kParts;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int p = 0; p < kParts; ++p) {
#pragma unroll
    for (int g = 0; g < kG; ++g) {
      acc4[((warp * kParts + p) * kG + g) * 32 + lane] =
          make_float4(acc[p][4 * g], acc[p][4 * g + 1], acc[p][4 * g + 2], acc[p][4 * g + 3]);
    }
  }
  __syncthreads();
  const float* a = reinterpret_cast<const float*>(acc4);
  float* out = partials + size_t(blockIdx.x) * kParts * C;
  for (int c = threadIdx.x; c < kParts * C; c += blockDim.x) {
    const int p = c / C, col = c - p * C, q = col / kN, e = (q / 32) * kN + col % kN;
    const int slot = (p * kG + e / 4) * 128 + (q % 32) * 4 + e % 4;
    float t = 0.0f;
    for (int k = 0; k < S::kWarps; ++k) t += a[k * kParts * kG * 128 + slot];
    out[c] = t;
  }
}

template <typename T, int P, bool kSum>
__global__ void __launch_bounds__(RegisterShape<T, P, kSum>::kWarps * 32, 1)
    layernorm_backward_register_kernel(T* dx, float* partials, const T* dy, const T* x, const T* w,
                                       const float* mean, const float* rstd, int N, int C,
                                       bool accumulate) {
  using S = RegisterShape<T, P, kSum>;
  constexpr int kWarps = S::kWarps;
  extern __shared__ float4 shared4[];  // w, then the warps' sums (RegisterShape)
  float4* w4 = shared4;
  stage_weights<T, P>(w4, w, C);
  __syncthreads();
  float acc[S::kParts][S::kE];
#pragma unroll
  for (int p = 0; p < S::kParts; ++p) {
#pragma unroll
    for (int e = 0; e < S::kE; ++e) acc[p][e] = 0.0f;
  }
  const int lane = threadIdx.x % 32;
  const int end = int(int64_t(blockIdx.x + 1) * N / gridDim.x);
  int row = int(int64_t(blockIdx.x) * N / gridDim.x) + threadIdx.x / 32;
  // Two row buffers, unrolled by two so that neither is ever copied.
  RowLoads<T, P> a, b;
  if (row < end) load_row(a, dy, x, dx, mean, rstd, row, C, lane, accumulate);
  for (; row < end; row += 2 * kWarps) {
    if (row + kWarps < end) load_row(b, dy, x, dx, mean, rstd, row + kWarps, C, lane, accumulate);
    if (row + 2 * kWarps < end) prefetch_row_l2(dy, x, dx, row + 2 * kWarps, C, lane, accumulate);
    backward_row<T, P, kSum>(a, dx + size_t(row) * C, w4, C, lane, accumulate, acc);
    if (row + kWarps >= end) break;
    if (row + 2 * kWarps < end) {
      load_row(a, dy, x, dx, mean, rstd, row + 2 * kWarps, C, lane, accumulate);
    }
    if (row + 3 * kWarps < end) prefetch_row_l2(dy, x, dx, row + 3 * kWarps, C, lane, accumulate);
    backward_row<T, P, kSum>(b, dx + size_t(row + kWarps) * C, w4, C, lane, accumulate, acc);
  }
  write_register_partials<T, P, kSum>(partials, shared4 + S::kW4, C, acc);
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

int reference_layernorm_backward_first_pass(__nv_bfloat16* dx, float* partials,
                                            const __nv_bfloat16* dy, const __nv_bfloat16* x,
                                            const __nv_bfloat16* w, const float* mean,
                                            const float* rstd, int N, int C, bool accumulate,
                                            bool sum, cudaStream_t stream) {
  if (C != 3 * 32 * 8) {
    throw std::invalid_argument("reference LayerNorm backward: C = " + std::to_string(C) +
                                ": the bench's copy covers only C = 768 (3 packs a lane)");
  }
  auto run = [&](auto kernel, size_t smem, int warps) {
    fit_shared_memory(kernel, smem);
    const int blocks = register_blocks(N, warps);
    kernel<<<blocks, warps * 32, smem, stream>>>(dx, partials, dy, x, w, mean, rstd, N, C,
                                                 accumulate);
    RY_CUDA_LAUNCHED();
    return blocks;
  };
  using bf16 = __nv_bfloat16;
  using WithSum = RegisterShape<bf16, 3, true>;
  using NoSum = RegisterShape<bf16, 3, false>;
  return sum ? run(layernorm_backward_register_kernel<bf16, 3, true>, WithSum::kSharedBytes,
                   WithSum::kWarps)
             : run(layernorm_backward_register_kernel<bf16, 3, false>, NoSum::kSharedBytes,
                   NoSum::kWarps);
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
