#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "async_copy.cuh"
#include "bias_grad_kernels.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "fixed_order_sum.hpp"
#include "layernorm_kernels.hpp"

namespace railyard::cuda {

namespace {

constexpr int kWarps = 8;  // rows per block of the forward and wide-row backward, a warp each
// Blocks of the wide-row backward (rows beyond the register kernel's 4 packs per lane): three
// per multiprocessor of an H100/H200 (132 of them); more would only lengthen the partials that
// the second pass sums.
constexpr int kMaxBackwardBlocks = 396;

// Above 48 KiB of dynamic shared memory a kernel must opt in (the wide-row kernel: C floats per
// warp and sum, 80 KiB at C = 1280 without the third). The carveout is asked to favour shared
// memory, so that as many of its blocks as fit stay resident.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(bytes)));
    RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
  }
}

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

// The most dynamic shared memory one block of the current device may opt in to.
size_t shared_memory_limit() {
  int device = 0, bytes = 0;
  RY_CUDA(cudaGetDevice(&device));
  RY_CUDA(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return size_t(bytes);
}

// Per-column sums the backward pass keeps: dw and db, and with the column sums of dx (kSum) a
// third, the bias gradient of the Linear layer whose output gradient dx is.
__host__ __device__ constexpr int backward_parts(bool sum) {
  return sum ? 3 : 2;
}

// The block's row of partials: the kWarps slices of acc ([kWarps][parts C]) added in warp order.
__device__ void write_block_partials(float* partials, const float* acc, int C, int parts) {
  __syncthreads();
  float* out = partials + size_t(blockIdx.x) * parts * C;
  for (int c = threadIdx.x; c < parts * C; c += blockDim.x) {
    float s = 0.0f;
    for (int k = 0; k < kWarps; ++k) s += acc[k * parts * C + c];
    out[c] = s;
  }
}

// The forward's arguments.
template <typename T>
struct ForwardArgs {
  T* out;
  float *mean, *rstd;
  const T *x, *w, *b;
  int N, C, ld_out;
};

// out's rows are ld_out apart (columns past C are left as they are: a Linear's ones column).
template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* x, const T* w,
                                         const T* b, int N, int C, int ld_out) {
  int row = blockIdx.x * kWarps + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const T* src = x + size_t(row) * C;
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += to_f(src[c]);
  float m = warp_sum(s) / C;
  float v = 0.0f;
  for (int c = lane; c < C; c += 32) {
    float d = to_f(src[c]) - m;
    v += d * d;
  }
  float r = rsqrtf(warp_sum(v) / C + kLayerNormEps);
  T* o = out + size_t(row) * ld_out;
  for (int c = lane; c < C; c += 32) {
    o[c] = from_f<T>((to_f(src[c]) - m) * r * to_f(w[c]) + to_f(b[c]));
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// Blocks stride over rows. Each warp sums dw, db (and dx's columns) of its rows in its own slice
// of shared memory (a lane owns its columns, so no two threads add to one place); then the block
// adds the warps' slices in warp order and writes one row of partials: no atomics, the same
// bits every run.
template <typename T, bool kSum>
__global__ void layernorm_backward_kernel(T* dx, const T* dx_in, float* partials, const T* dy,
                                          const T* x, const T* w, const float* mean,
                                          const float* rstd, int N, int C, bool accumulate) {
  constexpr int kParts = backward_parts(kSum);
  extern __shared__ float acc[];  // [kWarps][dw[C], db[C], (dx sums[C])]
  for (int c = threadIdx.x; c < kWarps * kParts * C; c += blockDim.x) acc[c] = 0.0f;
  __syncthreads();
  int lane = threadIdx.x % 32;
  float* mine = acc + (threadIdx.x / 32) * kParts * C;
  for (int row = blockIdx.x * kWarps + threadIdx.x / 32; row < N; row += gridDim.x * kWarps) {
    const T* dyr = dy + size_t(row) * C;
    const T* xr = x + size_t(row) * C;
    float m = mean[row], r = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int c = lane; c < C; c += 32) {
      float g = to_f(dyr[c]) * to_f(w[c]);
      float xh = (to_f(xr[c]) - m) * r;
      s1 += g;
      s2 += g * xh;
    }
    s1 = warp_sum(s1) / C;
    s2 = warp_sum(s2) / C;
    T* dxr = dx + size_t(row) * C;
    const T* dxi = dx_in + size_t(row) * C;
    for (int c = lane; c < C; c += 32) {
      float d = to_f(dyr[c]);
      float xh = (to_f(xr[c]) - m) * r;
      float g = r * (d * to_f(w[c]) - s1 - xh * s2);
      const T out = from_f<T>(accumulate ? to_f(dxi[c]) + g : g);
      dxr[c] = out;
      mine[c] += d * xh;
      mine[C + c] += d;
      if (kSum) mine[2 * C + c] += to_f(out);  // the value stored, as a bias gradient reads it
    }
  }
  write_block_partials(partials, acc, C, kParts);
}

// The staged kernel (rows of at most 4 packs per lane, C a multiple of the pack): each lane owns
// fixed columns (packs lane, lane + 32, ...; P of them) and keeps their column sums (dw, db, and
// with kSum dx's) in registers while its warp walks rows; one block per multiprocessor takes a
// contiguous run of rows, its kW warps every kW-th row of it. Each lane copies its own packs of
// a row (dy, x, the old dx) and the row's mean and rstd into a ring of kS slots of its warp in
// shared memory (cp.async): kS rows in flight per warp without a register, and no barrier, as a
// lane reads back only what it copied. (The register kernel before this one held the next row
// in registers: one row in flight per warp, 37 KB per multiprocessor, 2.8 TB/s.) At the end
// the warps' sums meet in shared memory and are added in warp order into the block's row of
// partials: every sum has a fixed order (rows in walk order per lane, then warps, then blocks
// in sum_partial_columns), the same bits every run.
template <typename T, int P, bool kSum, int kW, int kS, LayerNormBackwardKernel K>
struct StagedShape {
  static constexpr int kN = Pack<T>::kN, kH = kN / 4, kE = P * kN, kParts = backward_parts(kSum);
  static_assert(kN % 4 == 0, "a pack holds whole float4 groups");
  static_assert(kS >= 2 && kS <= 8, "cp.async.wait_group counts at most 7 groups in flight");
  // A slot in 16-byte units: the lane's packs of dy, x and the old dx [3][P][32 lanes], then
  // mean and rstd as each lane copied them, [2][32] floats.
  static constexpr int kSlot4 = 3 * P * 32 + 2 * 32 / 4;
  // Shared memory: a head (kStaged: w as fp32 [P][kH][32 lanes] float4; kLean: none), then
  // the rings [kW][kS] slots; at the end the warps' sums [kW][part][kE / 4][32] float4 (a
  // lane's 4 adjacent sums as one float4, a warp's 32 of them consecutive: no bank conflict)
  // take the rings' place.
  static constexpr int kHead4 = K == LayerNormBackwardKernel::kStaged ? P * kH * 32 : 0;
  static constexpr int kRing4 = kW * kS * kSlot4, kAcc4 = kW * kParts * (kE / 4) * 32;
  static constexpr size_t kSharedBytes =
      size_t(kHead4 + (kRing4 > kAcc4 ? kRing4 : kAcc4)) * sizeof(float4);
};

// One block per multiprocessor of an H100/H200 (132): fixed, so that the order of the sums
// does not depend on the device.
constexpr int kStagedBlocks = 132;
// The staged kernel's shape: warps a block (3 a scheduler to issue the arithmetic; registers a
// thread: 168 at most) and rows in flight per warp (slots of its ring). 16 x 2 and 14 x 3 (4
// warps a scheduler, 128 registers) and 8 x 4, 8 x 5 were slower on an H200 (bench/NOTES.md).
// Shared memory at bf16 C = 768 (3 packs a lane, 4864-byte slots, w 3 KiB): 174 KiB; at
// C = 1000 (4 packs, 6400-byte slots) 229 KiB: more than an H100/H200's 227, the wide-row kernel.
constexpr int kStagedWarps = 12, kStagedRows = 3;

// A lane's column sums: [part][element] (dw, db, with kSum dx's).
template <typename T, int P, bool kSum>
using LaneSums = float[backward_parts(kSum)][P * Pack<T>::kN];

// A row's values as the lane holds them: its packs of dy, x and the old dx as raw 32-bit words,
// and the row's statistics. Raw, because a Pack of bf16 is split into one register per element
// where it is loaded, twice the registers of the words; each element is widened where used.
template <typename T, int P>
struct RowLoads {
  uint4 dy[P], x[P], dx[P];
  float mean, rstd;
};

// What the staged kernel reads, and the L2 policy of the inputs read once (dy, x): evict-first,
// so that L2 keeps what the next kernels read (dx).
template <typename T>
struct RowSource {
  const T *dy, *x, *dx;
  const float *mean, *rstd;
  int C;
  bool accumulate;
  unsigned long long policy;
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

// Starts the copies of the lane's part of `row` into `slot` and commits them as one group, an
// empty one from `end` on, so that the count of groups in flight is the same every row.
template <typename T, int P>
__device__ __forceinline__ void stage_row(uint4* slot, const RowSource<T>& s, int row, int end,
                                          int lane) {
  constexpr int kN = Pack<T>::kN;
  if (row < end) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int q = lane + 32 * i;
      if (q < s.C / kN) {
        const size_t at = size_t(row) * s.C + size_t(q) * kN;
        copy_async16_hinted(slot + i * 32 + lane, s.dy + at, s.policy);
        copy_async16_hinted(slot + (P + i) * 32 + lane, s.x + at, s.policy);
        if (s.accumulate) copy_async16(slot + (2 * P + i) * 32 + lane, s.dx + at);
      }
    }
    float* stats = reinterpret_cast<float*>(slot + 3 * P * 32);
    copy_async4(stats + lane, s.mean + row);
    copy_async4(stats + 32 + lane, s.rstd + row);
  }
  commit_async();
}

// w as kStaged reads it: the lane's fp32 groups of 4 from shared memory.
struct SharedWeights {
  const float4* w4;
  int lane;
  template <int kH>
  __device__ __forceinline__ float4 group(int i, int h) const {
    return w4[(i * kH + h) * 32 + lane];
  }
};

// w as kLean keeps it: the lane's packs as raw words in registers (loaded once, widened where
// used: the same fp32 values).
template <typename T, int P>
struct RegisterWeights {
  uint4 w[P];
  __device__ RegisterWeights(const T* wp, int C, int lane) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int q = lane + 32 * i;
      w[i] = q < C / Pack<T>::kN ? *reinterpret_cast<const uint4*>(wp + size_t(q) * Pack<T>::kN)
                                 : make_uint4(0, 0, 0, 0);
    }
  }
  template <int kH>
  __device__ __forceinline__ float4 group(int i, int h) const {
    return make_float4(element<T>(w[i], 4 * h), element<T>(w[i], 4 * h + 1),
                       element<T>(w[i], 4 * h + 2), element<T>(w[i], 4 * h + 3));
  }
};

// A pack of values rounded to T: bf16 two at a time (one conversion instruction for a pair,
// each rounded to nearest even as from_f rounds one).
template <typename T>
__device__ __forceinline__ Pack<T> round_pairs(const float (&v)[Pack<T>::kN]) {
  Pack<T> out;
  if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int k = 0; k < Pack<T>::kN; k += 2) {
      *reinterpret_cast<__nv_bfloat162*>(&out.v[k]) = __floats2bfloat162_rn(v[k], v[k + 1]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < Pack<T>::kN; ++k) out.v[k] = from_f<T>(v[k]);
  }
  return out;
}

// The lane's part of a staged row, from its slot (after its group has been waited for).
template <typename T, int P>
__device__ __forceinline__ void read_slot(RowLoads<T, P>& b, const uint4* slot, int C, int lane,
                                          bool accumulate) {
#pragma unroll
  for (int i = 0; i < P; ++i) {
    if (lane + 32 * i < C / Pack<T>::kN) {
      b.dy[i] = slot[i * 32 + lane];
      b.x[i] = slot[(P + i) * 32 + lane];
      if (accumulate) b.dx[i] = slot[(2 * P + i) * 32 + lane];
    }
  }
  const float* stats = reinterpret_cast<const float*>(slot + 3 * P * 32);
  b.mean = stats[lane];
  b.rstd = stats[32 + lane];
}

// One row's two sums (of d*w and d*w*xhat, warp shuffles), each over C; the lane's column
// sums of d*xhat and d added to on the way.
template <typename T, int P, bool kSum, typename Weights>
__device__ __forceinline__ float2 row_sums(const RowLoads<T, P>& b, const Weights& wt, int C,
                                           int lane, LaneSums<T, P, kSum>& acc) {
  constexpr int kN = Pack<T>::kN, kH = kN / 4;
  const float m = b.mean, r = b.rstd;
  float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    if (lane + 32 * i >= C / kN) continue;
#pragma unroll
    for (int h = 0; h < kH; ++h) {
      const float4 wv = wt.template group<kH>(i, h);
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
  return make_float2(s1, s2);
}

// One row's dx from its two sums, stored (added to the old dx when accumulating); with kSum its
// values as stored added to the lane's column sums. kPairs: dx rounded two at a time
// (round_pairs), else one at a time: the same values.
template <typename T, int P, bool kSum, bool kPairs, typename Weights>
__device__ __forceinline__ void store_row_dx(const RowLoads<T, P>& b, T* dxr, const Weights& wt,
                                             int C, int lane, bool accumulate, float s1, float s2,
                                             LaneSums<T, P, kSum>& acc) {
  constexpr int kN = Pack<T>::kN, kH = kN / 4;
  const float m = b.mean, r = b.rstd;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int q = lane + 32 * i;
    if (q >= C / kN) continue;
    Pack<T> out;
    [[maybe_unused]] float v[kN];
#pragma unroll
    for (int h = 0; h < kH; ++h) {
      const float4 wv = wt.template group<kH>(i, h);
      const float* wf = &wv.x;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int k = h * 4 + j;
        const float d = element<T>(b.dy[i], k), xh = (element<T>(b.x[i], k) - m) * r;
        const float g = r * (d * wf[j] - s1 - xh * s2);
        if constexpr (kPairs) {
          v[k] = accumulate ? element<T>(b.dx[i], k) + g : g;
        } else {
          out.v[k] = from_f<T>(accumulate ? element<T>(b.dx[i], k) + g : g);
          if constexpr (kSum) acc[2][i * kN + k] += to_f(out.v[k]);  // as stored, as a bias reads
        }
      }
    }
    if constexpr (kPairs) {
      out = round_pairs<T>(v);
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        if constexpr (kSum) acc[2][i * kN + k] += to_f(out.v[k]);
      }
    }
    store_pack(dxr + size_t(q) * kN, out);
  }
}

// One row: the two row sums (warp shuffles), dx stored, the lane's column sums added to.
template <typename T, int P, bool kSum, bool kPairs, typename Weights>
__device__ __forceinline__ void backward_row(const RowLoads<T, P>& b, T* dxr, const Weights& wt,
                                             int C, int lane, bool accumulate,
                                             LaneSums<T, P, kSum>& acc) {
  const float2 s = row_sums<T, P, kSum>(b, wt, C, lane, acc);
  store_row_dx<T, P, kSum, kPairs>(b, dxr, wt, C, lane, accumulate, s.x, s.y, acc);
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
// (column c = q kN + k of a part is element e = (q / 32) kN + k of lane q % 32). acc4 may be
// the rings' shared memory: the caller has waited for every warp to be done with it. kGroups:
// a thread adds 4 columns at a time, a float4 slot of every warp (kLean), else one
// column (kStaged); each column's sum the same, from 0 in warp order.
template <typename T, int P, bool kSum, int kW, bool kGroups>
__device__ void write_lane_partials(float* partials, float4* acc4, int C,
                                    const LaneSums<T, P, kSum>& acc) {
  constexpr int kN = Pack<T>::kN, kG = P * kN / 4, kParts = backward_parts(kSum);
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
  float* out = partials + size_t(blockIdx.x) * kParts * C;
  if constexpr (kGroups) {
    for (int s = threadIdx.x; s < kParts * kG * 32; s += blockDim.x) {
      const int p = s / (kG * 32), g = (s / 32) % kG, q = s % 32 + 32 * (4 * g / kN);
      if (q >= C / kN) continue;
      float4 t = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int k = 0; k < kW; ++k) {
        const float4 v = acc4[k * kParts * kG * 32 + s];
        t = make_float4(t.x + v.x, t.y + v.y, t.z + v.z, t.w + v.w);
      }
      float* o = out + size_t(p) * C + q * kN + 4 * g % kN;
      o[0] = t.x;
      o[1] = t.y;
      o[2] = t.z;
      o[3] = t.w;
    }
    return;
  }
  const float* a = reinterpret_cast<const float*>(acc4);
  for (int c = threadIdx.x; c < kParts * C; c += blockDim.x) {
    const int p = c / C, col = c - p * C, q = col / kN, e = (q / 32) * kN + col % kN;
    const int slot = (p * kG + e / 4) * 128 + (q % 32) * 4 + e % 4;
    float t = 0.0f;
    for (int k = 0; k < kW; ++k) t += a[k * kParts * kG * 128 + slot];
    out[c] = t;
  }
}

// The rows' walk of both first passes (kStaged, kLean: LayerNormBackwardKernel).
template <typename T, int P, bool kSum, int kW, int kS, LayerNormBackwardKernel K>
__global__ void __launch_bounds__(kW * 32, 1)
    layernorm_backward_staged_kernel(T* dx, const T* dx_in, float* partials, const T* dy,
                                     const T* x, const T* w, const float* mean, const float* rstd,
                                     int N, int C, bool accumulate) {
  using S = StagedShape<T, P, kSum, kW, kS, K>;
  constexpr bool kShared = K == LayerNormBackwardKernel::kStaged;
  extern __shared__ float4 shared4[];  // the head, the warps' rings, at the end their sums
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint4* ring = reinterpret_cast<uint4*>(shared4 + S::kHead4) + warp * kS * S::kSlot4;
  if constexpr (kShared) stage_weights<T, P>(shared4, w, C);
  const RowSource<T> src{dy, x, dx_in, mean, rstd, C, accumulate, evict_first_policy()};
  const int end = int(int64_t(blockIdx.x + 1) * N / gridDim.x);
  const int first = int(int64_t(blockIdx.x) * N / gridDim.x) + warp;
  auto stage = [&](int k, int row) {
    stage_row<T, P>(ring + (k % kS) * S::kSlot4, src, row, end, lane);
  };
  // Row first + k kW goes to slot k % kS. The copies of row k + kS - 1 start before row k is
  // waited for, into the slot that row k - 1 was read from (its values already used).
#pragma unroll
  for (int k = 0; k < kS - 1; ++k) stage(k, first + k * kW);
  LaneSums<T, P, kSum> acc;
#pragma unroll
  for (int p = 0; p < S::kParts; ++p) {
#pragma unroll
    for (int e = 0; e < S::kE; ++e) acc[p][e] = 0.0f;
  }
  // kStaged: w staged for the block; kLean: the lane's packs, loaded while the first rows are
  // on their way.
  std::conditional_t<kShared, SharedWeights, RegisterWeights<T, P>> wt = [&] {
    if constexpr (kShared) {
      __syncthreads();  // w staged
      return SharedWeights{shared4, lane};
    } else {
      return RegisterWeights<T, P>(w, C, lane);
    }
  }();
  int k = 0;
  for (int row = first; row < end; row += kW, ++k) {
    stage(k + kS - 1, row + (kS - 1) * kW);
    wait_async(kS - 1);  // row k's group has landed
    RowLoads<T, P> b;
    read_slot<T, P>(b, ring + (k % kS) * S::kSlot4, C, lane, accumulate);
    backward_row<T, P, kSum, !kShared>(b, dx + size_t(row) * C, wt, C, lane, accumulate, acc);
  }
  wait_async(0);
  __syncthreads();  // every warp done with its ring: the sums take its place
  write_lane_partials<T, P, kSum, kW, !kShared>(partials, shared4 + S::kHead4, C, acc);
}

// One row of the packed forward, its packs loaded: the statistics and the normalised row.
template <typename T, int P>
__device__ __forceinline__ void forward_row(const Pack<T> (&px)[P], const ForwardArgs<T>& a,
                                            int row, int lane) {
  constexpr int kN = Pack<T>::kN;
  const int packs = a.C / kN;
  float v[P][kN];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    if (lane + 32 * i < packs) {
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        v[i][k] = to_f(px[i].v[k]);
        s += v[i][k];
      }
    }
  }
  const float m = warp_sum(s) / a.C;
  float var = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    if (lane + 32 * i < packs) {
#pragma unroll
      for (int k = 0; k < kN; ++k) var += (v[i][k] - m) * (v[i][k] - m);
    }
  }
  const float r = rsqrtf(warp_sum(var) / a.C + kLayerNormEps);
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int q = lane + 32 * i;
    if (q < packs) {
      Pack<T> pw = load_pack(a.w + q * kN), pb = load_pack(a.b + q * kN), po;
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        po.v[k] = from_f<T>((v[i][k] - m) * r * to_f(pw.v[k]) + to_f(pb.v[k]));
      }
      store_pack(a.out + size_t(row) * a.ld_out + q * kN, po);
    }
  }
  if (lane == 0) {
    a.mean[row] = m;
    a.rstd[row] = r;
  }
}

// The forward with a row a warp held in registers (each lane at most P packs), read once.
template <typename T, int P>
__global__ void layernorm_forward_packed_kernel(ForwardArgs<T> a) {
  constexpr int kN = Pack<T>::kN;
  const int lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= a.N) return;
  Pack<T> px[P];
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int q = lane + 32 * i;
    if (q < a.C / kN) px[i] = load_pack(a.x + size_t(row) * a.C + q * kN);
  }
  forward_row<T, P>(px, a, row, lane);
}

// Calls f(std::integral_constant<int, P>{}) for P = packs per lane, 1 to 4.
template <typename F>
auto with_lane_packs(int packs, F&& f) {
  switch (packs) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

template <typename T>
void launch_layernorm_forward(const ForwardArgs<T>& a, cudaStream_t stream) {
  if (a.ld_out < a.C || a.ld_out % Pack<T>::kN != 0) {
    throw std::invalid_argument("layernorm_forward: output row stride " + std::to_string(a.ld_out) +
                                " for rows of " + std::to_string(a.C) +
                                ": it must be >= the row and whole 16-byte packs");
  }
  const int lane_packs = (a.C / Pack<T>::kN + 31) / 32;
  if (lane_packs > 4) {  // wide rows: two passes over memory
    layernorm_forward_kernel<T><<<(a.N + kWarps - 1) / kWarps, kWarps * 32, 0, stream>>>(
        a.out, a.mean, a.rstd, a.x, a.w, a.b, a.N, a.C, a.ld_out);
    RY_CUDA_LAUNCHED();
    return;
  }
  with_lane_packs(lane_packs, [&](auto p) {
    constexpr int P = decltype(p)::value;
    const int blocks = (a.N + kWarps - 1) / kWarps;
    layernorm_forward_packed_kernel<T, P><<<blocks, kWarps * 32, 0, stream>>>(a);
    RY_CUDA_LAUNCHED();
  });
}

// Blocks of the wide-row kernel: three per multiprocessor of an H100/H200.
int layernorm_backward_blocks(int N) {
  int blocks = (N + kWarps - 1) / kWarps;
  return blocks < kMaxBackwardBlocks ? blocks : kMaxBackwardBlocks;
}

// Packs per lane of the staged kernel, or 0 where rows are too wide for it (or not whole
// packs): those take the wide-row kernel.
template <typename T>
int staged_lane_packs(int C) {
  const int lane_packs = (C / Pack<T>::kN + 31) / 32;
  return C % Pack<T>::kN == 0 && lane_packs <= 4 ? lane_packs : 0;
}

// Shared memory of a wide-row block: per warp and part, C floats.
size_t backward_shared_bytes(int C, int parts) {
  return size_t(kWarps) * parts * C * sizeof(float);
}

// One shape of the staged kernels at P packs a lane; 0 where its rings do not fit.
template <typename T, int P, bool kSum, LayerNormBackwardKernel K>
int launch_staged_shape(T* dx, const T* dx_in, float* partials, const T* dy, const T* x, const T* w,
                        const float* mean, const float* rstd, int N, int C, bool accumulate,
                        cudaStream_t stream) {
  constexpr int kW = kStagedWarps, kS = kStagedRows;
  using S = StagedShape<T, P, kSum, kW, kS, K>;
  if (S::kSharedBytes > shared_memory_limit()) return 0;
  auto kernel = layernorm_backward_staged_kernel<T, P, kSum, kW, kS, K>;
  fit_shared_memory(kernel, S::kSharedBytes);
  const int blocks = std::min(kStagedBlocks, (N + kW - 1) / kW);
  kernel<<<blocks, kW * 32, S::kSharedBytes, stream>>>(dx, dx_in, partials, dy, x, w, mean, rstd, N,
                                                       C, accumulate);
  RY_CUDA_LAUNCHED();
  return blocks;
}

// Calls f(std::integral_constant<LayerNormBackwardKernel, K>{}) for K = k.
template <typename F>
auto with_backward_kernel(LayerNormBackwardKernel k, F&& f) {
  using K = LayerNormBackwardKernel;
  switch (k) {
    case K::kLean:
      return f(std::integral_constant<K, K::kLean>{});
    default:
      return f(std::integral_constant<K, K::kStaged>{});
  }
}

// The staged kernels' first pass (dx and a row of partials per block); returns its rows of
// partials (its blocks), or 0 where its rings do not fit the device's shared memory.
template <typename T, bool kSum>
int launch_staged_backward(LayerNormBackwardKernel which, int lane_packs, T* dx, const T* dx_in,
                           float* partials, const T* dy, const T* x, const T* w, const float* mean,
                           const float* rstd, int N, int C, bool accumulate, cudaStream_t stream) {
  return with_lane_packs(lane_packs, [&](auto p) {
    return with_backward_kernel(which, [&](auto k) {
      return launch_staged_shape<T, decltype(p)::value, kSum, decltype(k)::value>(
          dx, dx_in, partials, dy, x, w, mean, rstd, N, C, accumulate, stream);
    });
  });
}

// The wide-row kernel's first pass: two passes over memory, the sums in shared memory.
template <typename T, bool kSum>
int launch_wide_backward(T* dx, const T* dx_in, float* partials, const T* dy, const T* x,
                         const T* w, const float* mean, const float* rstd, int N, int C,
                         bool accumulate, cudaStream_t stream) {
  const int blocks = layernorm_backward_blocks(N);
  const size_t smem = backward_shared_bytes(C, backward_parts(kSum));
  auto kernel = layernorm_backward_kernel<T, kSum>;
  allow_shared_memory(kernel, smem);
  kernel<<<blocks, kWarps * 32, smem, stream>>>(dx, dx_in, partials, dy, x, w, mean, rstd, N, C,
                                                accumulate);
  RY_CUDA_LAUNCHED();
  return blocks;
}

// The first pass: dx and one row of partials per block ([blocks][parts C]), the staged kernel
// where the row fits it, else the wide-row one; returns the rows of partials. fused_sum: in,
// whether dx's column sums are wanted; out, whether they are among the partials (wide rows:
// only where shared memory holds a third slice).
template <typename T>
int layernorm_backward_first_pass(LayerNormBackwardKernel which, bool& fused_sum, T* dx,
                                  const T* dx_in, float* partials, const T* dy, const T* x,
                                  const T* w, const float* mean, const float* rstd, int N, int C,
                                  bool accumulate, cudaStream_t stream) {
  const int lane_packs = staged_lane_packs<T>(C);
  if (lane_packs != 0) {
    const int rows =
        fused_sum ? launch_staged_backward<T, true>(which, lane_packs, dx, dx_in, partials, dy, x,
                                                    w, mean, rstd, N, C, accumulate, stream)
                  : launch_staged_backward<T, false>(which, lane_packs, dx, dx_in, partials, dy, x,
                                                     w, mean, rstd, N, C, accumulate, stream);
    if (rows != 0) return rows;
  }
  const size_t limit = shared_memory_limit();
  if (backward_shared_bytes(C, 2) > limit) {
    throw std::invalid_argument("layernorm_backward: rows of " + std::to_string(C) + " need " +
                                std::to_string(backward_shared_bytes(C, 2)) +
                                " bytes of shared memory per block, this GPU allows " +
                                std::to_string(limit) + ": use a smaller --dim");
  }
  fused_sum = fused_sum && backward_shared_bytes(C, 3) <= limit;
  return fused_sum ? launch_wide_backward<T, true>(dx, dx_in, partials, dy, x, w, mean, rstd, N, C,
                                                   accumulate, stream)
                   : launch_wide_backward<T, false>(dx, dx_in, partials, dy, x, w, mean, rstd, N, C,
                                                    accumulate, stream);
}

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, int N,
                       int C, int ld_out, cudaStream_t stream) {
  launch_layernorm_forward<T>({out, mean, rstd, x, w, b, N, C, ld_out}, stream);
}

size_t layernorm_backward_partials(int N, int C) {
  return std::max(size_t(layernorm_backward_blocks(N)) * backward_parts(true) * C,
                  bias_grad_partials(N, C));
}

template <typename T>
void layernorm_backward(T* dx, float* dw, float* db, float* dsum, float* partials, const T* dy,
                        const T* x, const T* w, const float* mean, const float* rstd, int N, int C,
                        bool accumulate, bool accumulate_params, cudaStream_t stream,
                        std::vector<ColumnSums>* deferred, const T* dx_in,
                        LayerNormBackwardKernel kernel) {
  bool fused_sum = dsum != nullptr;
  const int rows =
      layernorm_backward_first_pass<T>(kernel, fused_sum, dx, dx_in != nullptr ? dx_in : dx,
                                       partials, dy, x, w, mean, rstd, N, C, accumulate, stream);
  ColumnSums sums;
  sums.partials = partials;
  sums.rows = rows;
  sums.cols = backward_parts(fused_sum) * C;
  sums.width = C;
  sums.out[0] = dw;
  sums.out[1] = db;
  sums.out[2] = fused_sum ? dsum : nullptr;
  sums.accumulate = accumulate_params;
  const bool whole = dsum == nullptr || fused_sum;  // else bias_grad reuses the partials now
  if (deferred != nullptr && whole) {
    deferred->push_back(sums);
    return;
  }
  sum_partial_columns(sums, stream);
  if (!whole) bias_grad(dsum, partials, dx, N, C, accumulate_params, stream);
}

#define RY_INSTANTIATE(T)                                                                         \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int,  \
                                     int, cudaStream_t);                                          \
  template void layernorm_backward<T>(T*, float*, float*, float*, float*, const T*, const T*,     \
                                      const T*, const float*, const float*, int, int, bool, bool, \
                                      cudaStream_t, std::vector<ColumnSums>*, const T*,           \
                                      LayerNormBackwardKernel);
RY_INSTANTIATE(float)
RY_INSTANTIATE(bf16)
#undef RY_INSTANTIATE

}  // namespace railyard::cuda
