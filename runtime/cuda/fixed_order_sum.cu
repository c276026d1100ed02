#include "cuda_check.hpp"
#include "fixed_order_sum.hpp"

namespace railyard::cuda {

namespace {

constexpr int kLanes = 16;  // row lanes per block; each sums rows lane, lane + 16, ...

// Block (32, kLanes): 32 adjacent columns read coalesced; the lanes' sums meet in shared memory
// and are added in lane order, so the grouping of the sum never changes.
__global__ void sum_partial_columns_kernel(float* out_lo, float* out_hi, int split,
                                           const float* partials, int rows, int cols,
                                           bool accumulate) {
  __shared__ float part[kLanes][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (col < cols) {
    // Unrolled so several loads are in flight; the additions stay in row order.
#pragma unroll 8
    for (int r = threadIdx.y; r < rows; r += kLanes) s += partials[size_t(r) * cols + col];
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || col >= cols) return;
  float t = 0.0f;
  for (int i = 0; i < kLanes; ++i) t += part[i][threadIdx.x];
  float* o = col < split ? out_lo + col : out_hi + (col - split);
  *o = accumulate ? *o + t : t;
}

}  // namespace

void sum_partial_columns(float* out_lo, float* out_hi, int split, const float* partials, int rows,
                         int cols, bool accumulate, cudaStream_t stream) {
  sum_partial_columns_kernel<<<(cols + 31) / 32, dim3(32, kLanes), 0, stream>>>(
      out_lo, out_hi, split, partials, rows, cols, accumulate);
  RY_CUDA_LAUNCHED();
}

}  // namespace railyard::cuda
