#include <algorithm>
#include <stdexcept>
#include <string>

#include "bias_grad_kernels.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "fixed_order_sum.hpp"
#include "layernorm_kernels.hpp"

namespace railyard::cuda {

namespace {

constexpr int kWarps = 8;  // rows per block, one warp each
// Blocks of the backward pass: three per multiprocessor of an H100/H200 (132 of them), as many
// as registers (80 per thread at C = 768, bf16) and shared memory (48 KiB each) let stay
// resident; more would only lengthen the partials that the second pass sums.
constexpr int kMaxBackwardBlocks = 396;

// Above 48 KiB of dynamic shared memory a kernel must opt in (C = 768 with the column sums of
// dx, wider rows without). The carveout is asked to favour shared memory: three blocks of 72 KiB
// need 219 of an H100/H200's 228 KiB, and only w (a few KiB) is read twice through L1.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024) {
    RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(bytes)));
    RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 cudaSharedmemCarveoutMaxShared));
  }
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

// With delta non-null, the row is x + delta (rounded to T, the value stored and normalised).
// out's rows are ld_out apart (columns past C are left as they are: a Linear's ones column).
template <typename T>
__global__ void layernorm_forward_kernel(T* resid_out, T* out, float* mean, float* rstd, const T* x,
                                         const T* delta, const T* w, const T* b, int N, int C,
                                         int ld_out) {
  int row = blockIdx.x * kWarps + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const T* xr = x + size_t(row) * C;
  const T* src = xr;
  if (delta != nullptr) {
    const T* dr = delta + size_t(row) * C;
    T* rr = resid_out + size_t(row) * C;
    for (int c = lane; c < C; c += 32) rr[c] = from_f<T>(to_f(xr[c]) + to_f(dr[c]));
    src = rr;
  }
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
__global__ void layernorm_backward_kernel(T* dx, float* partials, const T* dy, const T* x,
                                          const T* w, const float* mean, const float* rstd, int N,
                                          int C, bool accumulate) {
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
    for (int c = lane; c < C; c += 32) {
      float d = to_f(dyr[c]);
      float xh = (to_f(xr[c]) - m) * r;
      float g = r * (d * to_f(w[c]) - s1 - xh * s2);
      const T out = from_f<T>(accumulate ? to_f(dxr[c]) + g : g);
      dxr[c] = out;
      mine[c] += d * xh;
      mine[C + c] += d;
      if (kSum) mine[2 * C + c] += to_f(out);  // the value stored, as a bias gradient reads it
    }
  }
  write_block_partials(partials, acc, C, kParts);
}

// The same with each lane's columns fixed (packs lane, lane + 32, ...; at most P of them): the
// row stays in registers (as loaded, 16-bit for bf16) between its two passes, and dw, db
// accumulate in the warp's slice of shared memory, w is read again per row (from L1).
// Registers are what limits how many warps a multiprocessor holds, and so how many rows' loads
// are in flight. The slice is laid out by (group of 4 elements, lane, element in group): a lane
// reads and writes its 4 adjacent floats as one float4 and the warp's 32 float4 are 512
// consecutive bytes (no bank conflict), a quarter of the shared-memory instructions of one float
// per access; those instructions, not device memory, were what held the kernel at 2.6 TB/s. The
// column sums of dx (kSum) take a third slice of the same layout. (Loading the old dx with dy
// and x, before the warp sums, needs 12 more registers: at 80 it spills.)
// Every sum keeps its order (a lane's columns row by row, the slices in warp order): the bits
// are those of the one-float layout this replaced.
template <typename T, int P, bool kSum>
__global__ void __launch_bounds__(kWarps * 32, 3)
    layernorm_backward_packed_kernel(T* dx, float* partials, const T* dy, const T* x, const T* w,
                                     const float* mean, const float* rstd, int N, int C,
                                     bool accumulate) {
  constexpr int kN = Pack<T>::kN, kGroups = P * kN / 4, kParts = backward_parts(kSum);
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

// The same with the row held in registers (each lane at most P packs), read once.
template <typename T, int P>
__global__ void layernorm_forward_packed_kernel(T* resid_out, T* out, float* mean, float* rstd,
                                                const T* x, const T* delta, const T* w, const T* b,
                                                int N, int C, int ld_out) {
  constexpr int kN = Pack<T>::kN;
  const int row = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= N) return;
  const int packs = C / kN;
  float v[P][kN];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    int q = lane + 32 * i;
    if (q < packs) {
      size_t at = size_t(row) * C + q * kN;
      Pack<T> px = load_pack(x + at);
      if (delta != nullptr) {
        Pack<T> pd = load_pack(delta + at);
#pragma unroll
        for (int k = 0; k < kN; ++k) px.v[k] = from_f<T>(to_f(px.v[k]) + to_f(pd.v[k]));
        store_pack(resid_out + at, px);
      }
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        v[i][k] = to_f(px.v[k]);
        s += v[i][k];
      }
    }
  }
  const float m = warp_sum(s) / C;
  float var = 0.0f;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    if (lane + 32 * i < packs) {
#pragma unroll
      for (int k = 0; k < kN; ++k) var += (v[i][k] - m) * (v[i][k] - m);
    }
  }
  const float r = rsqrtf(warp_sum(var) / C + kLayerNormEps);
#pragma unroll
  for (int i = 0; i < P; ++i) {
    int q = lane + 32 * i;
    if (q < packs) {
      Pack<T> pw = load_pack(w + q * kN), pb = load_pack(b + q * kN), po;
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        po.v[k] = from_f<T>((v[i][k] - m) * r * to_f(pw.v[k]) + to_f(pb.v[k]));
      }
      store_pack(out + size_t(row) * ld_out + q * kN, po);
    }
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

template <typename T>
void launch_layernorm_forward(T* resid_out, T* out, float* mean, float* rstd, const T* x,
                              const T* delta, const T* w, const T* b, int N, int C, int ld_out,
                              cudaStream_t stream) {
  if (ld_out < C || ld_out % Pack<T>::kN != 0) {
    throw std::invalid_argument("layernorm_forward: output row stride " + std::to_string(ld_out) +
                                " for rows of " + std::to_string(C) +
                                ": it must be >= the row and whole 16-byte packs");
  }
  const int blocks = (N + kWarps - 1) / kWarps;
  const int lane_packs = (C / Pack<T>::kN + 31) / 32;
  auto launch = [&](auto kernel) {
    kernel<<<blocks, kWarps * 32, 0, stream>>>(resid_out, out, mean, rstd, x, delta, w, b, N, C,
                                               ld_out);
  };
  if (lane_packs <= 1) {
    launch(layernorm_forward_packed_kernel<T, 1>);
  } else if (lane_packs <= 2) {
    launch(layernorm_forward_packed_kernel<T, 2>);
  } else if (lane_packs <= 3) {
    launch(layernorm_forward_packed_kernel<T, 3>);
  } else if (lane_packs <= 4) {
    launch(layernorm_forward_packed_kernel<T, 4>);
  } else {
    launch(layernorm_forward_kernel<T>);  // wide rows: two passes over memory
  }
  RY_CUDA_LAUNCHED();
}

int layernorm_backward_blocks(int N) {
  int blocks = (N + kWarps - 1) / kWarps;
  return blocks < kMaxBackwardBlocks ? blocks : kMaxBackwardBlocks;
}

// Shared memory of a backward block: per warp and part, the packed kernels' whole slots (P
// packs per lane), or C floats for wide rows.
template <typename T>
size_t backward_shared_bytes(int C, int parts) {
  const int lane_packs = (C / Pack<T>::kN + 31) / 32;
  const int slice = lane_packs <= 4 ? lane_packs * 32 * Pack<T>::kN : C;
  return size_t(kWarps) * parts * slice * sizeof(float);
}

// The most dynamic shared memory one block of the current device may opt in to.
size_t shared_memory_limit() {
  int device = 0, bytes = 0;
  RY_CUDA(cudaGetDevice(&device));
  RY_CUDA(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return size_t(bytes);
}

// The first pass: dx and one row of partials per block ([blocks][parts C]).
template <typename T, bool kSum>
void launch_layernorm_backward(T* dx, float* partials, const T* dy, const T* x, const T* w,
                               const float* mean, const float* rstd, int N, int C, bool accumulate,
                               cudaStream_t stream) {
  const int blocks = layernorm_backward_blocks(N);
  const int lane_packs = (C / Pack<T>::kN + 31) / 32;  // packs per lane
  const size_t smem = backward_shared_bytes<T>(C, backward_parts(kSum));
  auto launch = [&](auto kernel) {
    allow_shared_memory(kernel, smem);
    kernel<<<blocks, kWarps * 32, smem, stream>>>(dx, partials, dy, x, w, mean, rstd, N, C,
                                                  accumulate);
  };
  if (lane_packs <= 1) {
    launch(layernorm_backward_packed_kernel<T, 1, kSum>);
  } else if (lane_packs <= 2) {
    launch(layernorm_backward_packed_kernel<T, 2, kSum>);
  } else if (lane_packs <= 3) {
    launch(layernorm_backward_packed_kernel<T, 3, kSum>);
  } else if (lane_packs <= 4) {
    launch(layernorm_backward_packed_kernel<T, 4, kSum>);
  } else {
    launch(layernorm_backward_kernel<T, kSum>);  // wide rows: two passes over memory
  }
  RY_CUDA_LAUNCHED();
}

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, int N,
                       int C, int ld_out, cudaStream_t stream) {
  launch_layernorm_forward<T>(nullptr, out, mean, rstd, x, nullptr, w, b, N, C, ld_out, stream);
}

template <typename T>
void residual_layernorm_forward(T* resid_out, T* out, float* mean, float* rstd, const T* x,
                                const T* delta, const T* w, const T* b, int N, int C, int ld_out,
                                cudaStream_t stream) {
  launch_layernorm_forward<T>(resid_out, out, mean, rstd, x, delta, w, b, N, C, ld_out, stream);
}

size_t layernorm_backward_partials(int N, int C) {
  return std::max(size_t(layernorm_backward_blocks(N)) * backward_parts(true) * C,
                  bias_grad_partials(N, C));
}

template <typename T>
void layernorm_backward(T* dx, float* dw, float* db, float* dsum, float* partials, const T* dy,
                        const T* x, const T* w, const float* mean, const float* rstd, int N, int C,
                        bool accumulate, bool accumulate_params, const ColumnSums* also,
                        cudaStream_t stream) {
  const size_t limit = shared_memory_limit();
  if (backward_shared_bytes<T>(C, 2) > limit) {
    throw std::invalid_argument("layernorm_backward: rows of " + std::to_string(C) + " need " +
                                std::to_string(backward_shared_bytes<T>(C, 2)) +
                                " bytes of shared memory per block, this GPU allows " +
                                std::to_string(limit) + ": use a smaller --dim");
  }
  // Rows too wide for a third slice: dx's column sums by bias_grad's kernel after this pass.
  const bool fused_sum = dsum != nullptr && backward_shared_bytes<T>(C, 3) <= limit;
  if (fused_sum) {
    launch_layernorm_backward<T, true>(dx, partials, dy, x, w, mean, rstd, N, C, accumulate,
                                       stream);
  } else {
    launch_layernorm_backward<T, false>(dx, partials, dy, x, w, mean, rstd, N, C, accumulate,
                                        stream);
  }
  ColumnSums sums;
  sums.partials = partials;
  sums.rows = layernorm_backward_blocks(N);
  sums.cols = backward_parts(fused_sum) * C;
  sums.width = C;
  sums.out[0] = dw;
  sums.out[1] = db;
  sums.out[2] = fused_sum ? dsum : nullptr;
  sums.accumulate = accumulate_params;
  sum_partial_columns(sums, also != nullptr ? *also : ColumnSums{}, stream);
  if (dsum != nullptr && !fused_sum) bias_grad(dsum, partials, dx, N, C, accumulate_params, stream);
}

#define RY_INSTANTIATE(T)                                                                         \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int,  \
                                     int, cudaStream_t);                                          \
  template void residual_layernorm_forward<T>(T*, T*, float*, float*, const T*, const T*,         \
                                              const T*, const T*, int, int, int, cudaStream_t);   \
  template void layernorm_backward<T>(T*, float*, float*, float*, float*, const T*, const T*,     \
                                      const T*, const float*, const float*, int, int, bool, bool, \
                                      const ColumnSums*, cudaStream_t);
RY_INSTANTIATE(float)
RY_INSTANTIATE(bf16)
#undef RY_INSTANTIATE

}  // namespace railyard::cuda
