#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "ones_column_kernels.hpp"

namespace railyard::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65536 ? b : 65536);
}

template <typename T>
__global__ void set_ones_column_kernel(T* x, int N, int I, int ld) {
  const int pad = ld - I;
  const size_t n = size_t(N) * pad;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / pad;
    const int col = int(i - row * pad);
    x[row * ld + I + col] = T(col == 0 ? 1.0f : 0.0f);
  }
}

// Block row o of prod, one thread per column up to I (the zero padding is not read): coalesced
// reads of prod and writes of dw, no index division. For rows that are not whole 16-byte packs.
__global__ void split_ones_column_kernel(float* dw, float* db, const float* prod, int I, int ld,
                                         bool accumulate) {
  const int o = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c > I) return;
  const float v = prod[size_t(o) * ld + c];
  float* out = c < I ? dw + size_t(o) * I + c : db + o;
  *out = accumulate ? *out + v : v;
}

// kPackRows rows per block, 16-byte packs: the scalar kernel's grid for GPT-2 (769 columns in
// blocks of 256) left a fourth block per row holding one column, and its 4-byte accesses kept
// too few bytes in flight for a 7-10 MB copy (7.9 us a launch in the H200 step, 2.1 TB/s).
constexpr int kPackRows = 4, kPackThreads = 64;

// With sumsq, each block's sum of squares of what it wrote: fp32 per thread and warp (the same
// shuffle tree every call), the block's warps added in double in warp order by thread 0.
__global__ void split_ones_column_packed_kernel(float* dw, float* db, const float* prod, int O,
                                                int I, int ld, bool accumulate, double* sumsq) {
  __shared__ float warp_sums[kPackRows * kPackThreads / 32];
  const int o = blockIdx.x * kPackRows + threadIdx.y;
  float s = 0.0f;
  if (o < O) {
    const float4* src = reinterpret_cast<const float4*>(prod + size_t(o) * ld);
    float4* dst = reinterpret_cast<float4*>(dw + size_t(o) * I);
#pragma unroll 4
    for (int c = threadIdx.x; c < I / 4; c += kPackThreads) {
      float4 v = src[c];
      if (accumulate) {
        const float4 a = dst[c];
        v = make_float4(a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w);
      }
      dst[c] = v;
      s += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    if (threadIdx.x == 0) {
      float b = prod[size_t(o) * ld + I];
      if (accumulate) b += db[o];
      db[o] = b;
      s += b * b;
    }
  }
  if (sumsq == nullptr) return;  // the same for the whole grid
  s = warp_sum(s);
  const int thread = threadIdx.y * kPackThreads + threadIdx.x;
  if (thread % 32 == 0) warp_sums[thread / 32] = s;
  __syncthreads();
  if (thread == 0) {
    double total = 0.0;
    for (float w : warp_sums) total += double(w);
    sumsq[blockIdx.x] = total;
  }
}

bool packs_fit(const float* dw, const float* prod, int I, int ld) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return I % 4 == 0 && ld % 4 == 0 && aligned(dw) && aligned(prod);
}

void check_shape(const char* what, int N, int I, int ld) {
  if (N < 0 || I < 1 || ld <= I) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(N) + " rows of " +
                                std::to_string(I) + " columns at stride " + std::to_string(ld) +
                                "; the stride must leave room for the ones column (> columns)");
  }
}

}  // namespace

template <typename T>
void set_ones_column(T* x, int N, int I, int ld, cudaStream_t stream) {
  check_shape("set_ones_column", N, I, ld);
  if (N == 0) return;
  set_ones_column_kernel<<<blocks_for(size_t(N) * (ld - I)), kThreads, 0, stream>>>(x, N, I, ld);
  RY_CUDA_LAUNCHED();
}

int split_sumsq_slots(int O) {
  return (O + kPackRows - 1) / kPackRows;
}

void split_ones_column_product(float* dw, float* db, const float* prod, int O, int I, int ld,
                               bool accumulate, cudaStream_t stream, double* sumsq) {
  check_shape("split_ones_column_product", O, I, ld);
  if (O > 65535) {
    throw std::invalid_argument("split_ones_column_product: " + std::to_string(O) +
                                " output rows, more than one grid dimension holds (65535)");
  }
  const bool packs = packs_fit(dw, prod, I, ld);
  if (sumsq != nullptr && !packs) {
    throw std::invalid_argument(
        "split_ones_column_product: the sum of squares needs 16-byte packs (columns " +
        std::to_string(I) + " and stride " + std::to_string(ld) +
        " multiples of 4, dw and prod 16-byte aligned); leave it to the gradient norm's own pass");
  }
  if (O == 0) return;
  if (packs) {
    const dim3 block(kPackThreads, kPackRows);
    split_ones_column_packed_kernel<<<split_sumsq_slots(O), block, 0, stream>>>(
        dw, db, prod, O, I, ld, accumulate, sumsq);
  } else {
    const dim3 grid((I + 1 + kThreads - 1) / kThreads, O);
    split_ones_column_kernel<<<grid, kThreads, 0, stream>>>(dw, db, prod, I, ld, accumulate);
  }
  RY_CUDA_LAUNCHED();
}

template void set_ones_column<float>(float*, int, int, int, cudaStream_t);
template void set_ones_column<bf16>(bf16*, int, int, int, cudaStream_t);

}  // namespace railyard::cuda
