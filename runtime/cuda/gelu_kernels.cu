#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "gelu_kernels.hpp"

namespace railyard::cuda {

namespace {

// n is a multiple of the pack width (the engine's shapes are multiples of 8).
template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* in, size_t packs) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < packs;
       i += size_t(gridDim.x) * blockDim.x) {
    Pack<T> x = load_pack(in + i * Pack<T>::kN);
#pragma unroll
    for (int k = 0; k < Pack<T>::kN; ++k) x.v[k] = from_f<T>(gelu_tanh(to_f(x.v[k])));
    store_pack(out + i * Pack<T>::kN, x);
  }
}

int blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return static_cast<int>(b < 65536 ? b : 65536);
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* in, size_t n, cudaStream_t stream) {
  gelu_forward_kernel<<<blocks_for(n / Pack<T>::kN), 256, 0, stream>>>(out, in, n / Pack<T>::kN);
  RY_CUDA_LAUNCHED();
}

template void gelu_forward<float>(float*, const float*, size_t, cudaStream_t);
template void gelu_forward<bf16>(bf16*, const bf16*, size_t, cudaStream_t);

}  // namespace railyard::cuda
