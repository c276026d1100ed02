#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "fixed_order_sum.hpp"

namespace railyard::cuda {

namespace {

static_assert(kMaxColumnSumOutputs == 3, "the kernel selects among three outputs");

constexpr int kLanes = 16;  // row lanes per block; each sums rows lane, lane + 16, ...

void check_shape(const ColumnSums& s) {
  if (s.cols < 0 || s.rows < 0 || s.width <= 0 || s.cols > kMaxColumnSumOutputs * s.width) {
    throw std::invalid_argument(
        "sum_partial_columns: " + std::to_string(s.cols) + " columns of partials in outputs of " +
        std::to_string(s.width) + ": at most " + std::to_string(kMaxColumnSumOutputs) +
        " outputs of a positive width (a caller's partials layout is wrong)");
  }
}

// Block (32, kLanes) of column block `bx`: 32 adjacent columns read coalesced; the lanes' sums
// meet in shared memory and are added in lane order, so the grouping of the sum never changes.
// Both kernels below run this, so a batched sum has the bits of the single one.
__device__ __forceinline__ void sum_column_block(const ColumnSums& s, int bx) {
  __shared__ float part[kLanes][33];
  const int col = bx * 32 + threadIdx.x;
  float t = 0.0f;
  if (col < s.cols) {
    // Unrolled so several loads are in flight; the additions stay in row order.
#pragma unroll 8
    for (int r = threadIdx.y; r < s.rows; r += kLanes) t += s.partials[size_t(r) * s.cols + col];
  }
  part[threadIdx.y][threadIdx.x] = t;
  __syncthreads();
  if (threadIdx.y != 0 || col >= s.cols) return;
  float sum = 0.0f;
  for (int i = 0; i < kLanes; ++i) sum += part[i][threadIdx.x];
  // Selected, not indexed: an indexed kernel parameter would be copied to local memory.
  const int k = col / s.width;
  float* o = (k == 0 ? s.out[0] : k == 1 ? s.out[1] : s.out[2]) + col % s.width;
  *o = s.accumulate ? *o + sum : sum;
}

__global__ void sum_partial_columns_kernel(ColumnSums s) {
  sum_column_block(s, blockIdx.x);
}

struct ColumnSumsBatch {
  ColumnSums sums[kColumnSumsPerLaunch];
};

// One block row (blockIdx.y) per reduction; rows past a reduction's columns return at once.
// __grid_constant__: the table is read in place, not copied to local memory per thread.
__global__ void sum_partial_columns_batch_kernel(const __grid_constant__ ColumnSumsBatch b) {
  const ColumnSums& s = b.sums[blockIdx.y];
  if (int(blockIdx.x) * 32 >= s.cols) return;  // the whole block: no thread reaches the barrier
  sum_column_block(s, blockIdx.x);
}

}  // namespace

void sum_partial_columns(const ColumnSums& sums, cudaStream_t stream) {
  check_shape(sums);
  const int blocks = (sums.cols + 31) / 32;
  if (blocks == 0) return;
  sum_partial_columns_kernel<<<blocks, dim3(32, kLanes), 0, stream>>>(sums);
  RY_CUDA_LAUNCHED();
}

void sum_partial_columns(const std::vector<ColumnSums>& batch, cudaStream_t stream) {
  for (size_t first = 0; first < batch.size(); first += kColumnSumsPerLaunch) {
    const size_t count = std::min(batch.size() - first, size_t(kColumnSumsPerLaunch));
    ColumnSumsBatch b{};
    int blocks = 0;
    for (size_t i = 0; i < count; ++i) {
      check_shape(batch[first + i]);
      b.sums[i] = batch[first + i];
      blocks = std::max(blocks, (b.sums[i].cols + 31) / 32);
    }
    if (blocks == 0) continue;
    sum_partial_columns_batch_kernel<<<dim3(blocks, unsigned(count)), dim3(32, kLanes), 0,
                                       stream>>>(b);
    RY_CUDA_LAUNCHED();
  }
}

}  // namespace railyard::cuda
