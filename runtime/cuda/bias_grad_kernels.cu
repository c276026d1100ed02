#include "bias_grad_kernels.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "fixed_order_sum.hpp"

namespace railyard::cuda {

namespace {

constexpr int kRowsPerBlock = 512;

// Block (32, 8): 32 adjacent columns read coalesced, 8 row lanes, one chunk of rows; the 8
// lane sums meet in shared memory and the chunk's sum goes to its row of the partials.
template <typename T>
__global__ void bias_grad_kernel(float* partials, const T* dy, int N, int O) {
  __shared__ float part[8][33];
  int col = blockIdx.x * 32 + threadIdx.x;
  int row0 = blockIdx.y * kRowsPerBlock;
  int row1 = min(N, row0 + kRowsPerBlock);
  float s = 0.0f;
  if (col < O) {
    for (int r = row0 + threadIdx.y; r < row1; r += 8) s += to_f(dy[size_t(r) * O + col]);
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < O) {
    float t = 0.0f;
    for (int i = 0; i < 8; ++i) t += part[i][threadIdx.x];
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
  dim3 grid((O + 31) / 32, chunks(N));
  bias_grad_kernel<<<grid, dim3(32, 8), 0, stream>>>(partials, dy, N, O);
  RY_CUDA_LAUNCHED();
  sum_partial_columns(db, nullptr, O, partials, chunks(N), O, accumulate, stream);
}

template void bias_grad<float>(float*, float*, const float*, int, int, bool, cudaStream_t);
template void bias_grad<bf16>(float*, float*, const bf16*, int, int, bool, cudaStream_t);

}  // namespace railyard::cuda
