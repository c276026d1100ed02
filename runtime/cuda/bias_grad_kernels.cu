#include "bias_grad_kernels.hpp"

#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "fixed_order_sum.hpp"

namespace railyard::cuda {

namespace {

constexpr int kRowsPerBlock = 64;
constexpr int kRowLanes = 8;

// Block (32, kRowLanes): 32 adjacent 16-byte packs of a row (256 bf16 columns) read in one
// coalesced 512-byte access, kRowLanes row lanes, one chunk of rows. Each thread sums its pack's
// columns over the rows lane, lane + kRowLanes, ... in order; the lane sums meet in shared memory
// and are added in lane order, so every sum has one fixed grouping.
template <typename T>
__global__ void __launch_bounds__(32 * kRowLanes)
    bias_grad_kernel(float* partials, const T* dy, int N, int O) {
  constexpr int kN = Pack<T>::kN;
  __shared__ float part[kRowLanes][32 * kN];
  const int pack = blockIdx.x * 32 + threadIdx.x;
  const int row0 = blockIdx.y * kRowsPerBlock;
  const int row1 = min(N, row0 + kRowsPerBlock);
  float s[kN] = {};
  if (pack * kN < O) {
#pragma unroll 4
    for (int r = row0 + threadIdx.y; r < row1; r += kRowLanes) {
      const Pack<T> p = load_pack(dy + size_t(r) * O + size_t(pack) * kN);
#pragma unroll
      for (int k = 0; k < kN; ++k) s[k] += to_f(p.v[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < kN; ++k) part[threadIdx.y][threadIdx.x * kN + k] = s[k];
  __syncthreads();
  // 32 * kRowLanes threads finish the block's 32 * kN columns, lane sums in lane order.
  for (int c = threadIdx.y * 32 + threadIdx.x; c < 32 * kN; c += 32 * kRowLanes) {
    const int col = blockIdx.x * 32 * kN + c;
    if (col >= O) continue;
    float t = 0.0f;
    for (int i = 0; i < kRowLanes; ++i) t += part[i][c];
    partials[size_t(blockIdx.y) * O + col] = t;
  }
}

int chunks(int N) {
  return (N + kRowsPerBlock - 1) / kRowsPerBlock;
}

}  // namespace

size_t bias_grad_partials(int N, int O) {
  return size_t(chunks(N)) * O;
}

template <typename T>
void bias_grad(float* db, float* partials, const T* dy, int N, int O, bool accumulate,
               cudaStream_t stream) {
  if (O % Pack<T>::kN != 0) {
    throw std::invalid_argument("bias_grad: " + std::to_string(O) +
                                " columns, not whole 16-byte packs");
  }
  const int cols_per_block = 32 * Pack<T>::kN;
  dim3 grid((O + cols_per_block - 1) / cols_per_block, chunks(N));
  bias_grad_kernel<<<grid, dim3(32, kRowLanes), 0, stream>>>(partials, dy, N, O);
  RY_CUDA_LAUNCHED();
  ColumnSums second;
  second.partials = partials;
  second.rows = chunks(N);
  second.cols = second.width = O;
  second.out[0] = db;
  second.accumulate = accumulate;
  sum_partial_columns(second, stream);
}

template void bias_grad<float>(float*, float*, const float*, int, int, bool, cudaStream_t);
template void bias_grad<bf16>(float*, float*, const bf16*, int, int, bool, cudaStream_t);

}  // namespace railyard::cuda
