#include "convert_kernels.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

template <typename To, typename From>
__global__ void convert_kernel(To* out, const From* in, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    out[i] = from_f<To>(to_f(in[i]));
  }
}

}  // namespace

template <typename To, typename From>
void convert(To* out, const From* in, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  size_t b = (n + 255) / 256;
  convert_kernel<<<static_cast<int>(b < 65536 ? b : 65536), 256, 0, stream>>>(out, in, n);
  RY_CUDA_LAUNCHED();
}

template void convert<bf16, float>(bf16*, const float*, size_t, cudaStream_t);
template void convert<float, bf16>(float*, const bf16*, size_t, cudaStream_t);
template void convert<float, float>(float*, const float*, size_t, cudaStream_t);

}  // namespace railyard::cuda
