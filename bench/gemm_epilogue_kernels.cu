#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "gemm_epilogue_kernels.hpp"

namespace railyard::bench {

namespace {

using cuda::bf16;
using cuda::Pack;

// The chunking of runtime/cuda/bias_grad_kernels.cu: the same row grouping gives the same sums.
constexpr int kRowsPerBlock = 64;
constexpr int kRowLanes = 8;

__device__ __forceinline__ float dgelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  const float c = 0.044715f;
  const float t = tanhf(k * (x + c * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x * x);
}

// Block (32, kRowLanes) over one chunk of rows and 32 packs of columns, as bias_grad_kernel;
// each element is written once and its bf16 value summed where it was computed.
__global__ void __launch_bounds__(32 * kRowLanes)
    dgelu_colsum_kernel(bf16* dx, float* partials, const bf16* dp, const bf16* pre, int N, int I) {
  constexpr int kN = Pack<bf16>::kN;
  __shared__ float part[kRowLanes][32 * kN];
  const int pack = blockIdx.x * 32 + threadIdx.x;
  const int row0 = blockIdx.y * kRowsPerBlock;
  const int row1 = min(N, row0 + kRowsPerBlock);
  float s[kN] = {};
  if (pack * kN < I) {
#pragma unroll 4
    for (int r = row0 + threadIdx.y; r < row1; r += kRowLanes) {
      const size_t at = size_t(r) * I + size_t(pack) * kN;
      const Pack<bf16> g = cuda::load_pack(dp + at);
      const Pack<bf16> x = cuda::load_pack(pre + at);
      Pack<bf16> out;
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        out.v[k] = __float2bfloat16(cuda::to_f(g.v[k]) * dgelu_tanh(cuda::to_f(x.v[k])));
        s[k] += cuda::to_f(out.v[k]);
      }
      cuda::store_pack(dx + at, out);
    }
  }
#pragma unroll
  for (int k = 0; k < kN; ++k) part[threadIdx.y][threadIdx.x * kN + k] = s[k];
  __syncthreads();
  for (int c = threadIdx.y * 32 + threadIdx.x; c < 32 * kN; c += 32 * kRowLanes) {
    const int col = blockIdx.x * 32 * kN + c;
    if (col >= I) continue;
    float t = 0.0f;
    for (int i = 0; i < kRowLanes; ++i) t += part[i][c];
    partials[size_t(blockIdx.y) * I + col] = t;
  }
}

__global__ void gemm_bench_marker() {}

}  // namespace

int dgelu_colsum_chunks(int N) {
  return (N + kRowsPerBlock - 1) / kRowsPerBlock;
}

void dgelu_colsum(bf16* dx, float* partials, const bf16* dp, const bf16* pre, int N, int I,
                  cudaStream_t stream) {
  constexpr int kN = Pack<bf16>::kN;
  if (I % kN != 0) {
    throw std::invalid_argument("dgelu_colsum: " + std::to_string(I) +
                                " columns, not whole 16-byte packs");
  }
  dim3 grid((I + 32 * kN - 1) / (32 * kN), dgelu_colsum_chunks(N));
  dgelu_colsum_kernel<<<grid, dim3(32, kRowLanes), 0, stream>>>(dx, partials, dp, pre, N, I);
  RY_CUDA_LAUNCHED();
}

void launch_marker(cudaStream_t stream) {
  gemm_bench_marker<<<1, 1, 0, stream>>>();
  RY_CUDA_LAUNCHED();
}

}  // namespace railyard::bench
