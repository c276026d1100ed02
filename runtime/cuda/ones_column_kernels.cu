#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
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

// 32 x 32 tiles of dW' [O, I + 1] (row o, column c), 8 rows of threads, 4 elements each.
constexpr int kTile = 32, kTileRows = 8;

template <bool kTransposed>
__device__ float product_at(const float* prod, int o, int c, int O, int ld) {
  return kTransposed ? prod[size_t(c) * O + o] : prod[size_t(o) * ld + c];
}

__device__ void store(float* out, float v, bool accumulate) {
  *out = accumulate ? *out + v : v;
}

// One tile of dw per block: read along prod's rows (threadIdx.x along c, or along o where prod
// is transposed) into shared memory, written along dw's rows. The padding column keeps both
// the transposed stores and the loads free of bank conflicts. The blocks of the last tile column
// also write the bias gradient of their 32 rows.
template <bool kTransposed>
__global__ void split_ones_column_kernel(float* dw, float* db, const float* prod, int O, int I,
                                         int ld, bool accumulate) {
  __shared__ float tile[kTile][kTile + 1];  // [o - o0][c - c0]
  const int o0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile, tx = threadIdx.x;
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const int to = kTransposed ? tx : j, tc = kTransposed ? j : tx;
    if (o0 + to < O && c0 + tc < I)
      tile[to][tc] = product_at<kTransposed>(prod, o0 + to, c0 + tc, O, ld);
  }
  if (blockIdx.x == gridDim.x - 1 && threadIdx.y == 0 && o0 + tx < O) {
    store(db + o0 + tx, product_at<kTransposed>(prod, o0 + tx, I, O, ld), accumulate);
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    if (o0 + j < O && c0 + tx < I)
      store(dw + size_t(o0 + j) * I + c0 + tx, tile[j][tx], accumulate);
  }
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

void split_ones_column_product(float* dw, float* db, const float* prod, int O, int I, int ld,
                               OnesColumnLayout layout, bool accumulate, cudaStream_t stream) {
  check_shape("split_ones_column_product", O, I, ld);
  const int tile_rows = (O + kTile - 1) / kTile;
  if (tile_rows > 65535) {
    throw std::invalid_argument("split_ones_column_product: " + std::to_string(O) +
                                " output rows, more than 65535 tiles of " + std::to_string(kTile) +
                                " (one grid dimension)");
  }
  if (O == 0) return;
  const dim3 grid((I + kTile - 1) / kTile, tile_rows), block(kTile, kTileRows);
  if (layout == OnesColumnLayout::kInputsByOutputs) {
    split_ones_column_kernel<true><<<grid, block, 0, stream>>>(dw, db, prod, O, I, ld, accumulate);
  } else {
    split_ones_column_kernel<false><<<grid, block, 0, stream>>>(dw, db, prod, O, I, ld, accumulate);
  }
  RY_CUDA_LAUNCHED();
}

template void set_ones_column<float>(float*, int, int, int, cudaStream_t);
template void set_ones_column<bf16>(bf16*, int, int, int, cudaStream_t);

}  // namespace railyard::cuda
