#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "embedding_kernels.hpp"

namespace railyard::cuda {

namespace {

template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe,
                                         int Tn, int C, size_t total) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t row = i / C;
    int c = static_cast<int>(i % C);
    int t = static_cast<int>(row % Tn);
    int tok = tokens[row];
    out[i] = from_f<T>(to_f(wte[size_t(tok) * C + c]) + to_f(wpe[size_t(t) * C + c]));
  }
}

template <typename T>
__global__ void embedding_wte_backward_kernel(float* dwte, const T* dout, const int32_t* tokens,
                                              int C, size_t total) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t row = i / C;
    int c = static_cast<int>(i % C);
    atomicAdd(&dwte[size_t(tokens[row]) * C + c], to_f(dout[i]));
  }
}

// One thread per (t, c): the sum over the batch needs no atomics.
template <typename T>
__global__ void embedding_wpe_backward_kernel(float* dwpe, const T* dout, int B, int Tn, int C) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(Tn) * C) return;
  float s = 0.0f;
  for (int b = 0; b < B; ++b) s += to_f(dout[size_t(b) * Tn * C + i]);
  dwpe[i] += s;
}

int blocks_for(size_t n, int threads) {
  size_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65536 ? b : 65536);
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C, cudaStream_t stream) {
  size_t total = size_t(B) * Tn * C;
  embedding_forward_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(out, tokens, wte, wpe, Tn, C,
                                                                       total);
  RY_CUDA_LAUNCHED();
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int32_t* tokens, int B,
                        int Tn, int C, cudaStream_t stream) {
  size_t total = size_t(B) * Tn * C;
  embedding_wte_backward_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(dwte, dout, tokens, C,
                                                                            total);
  RY_CUDA_LAUNCHED();
  size_t tc = size_t(Tn) * C;
  embedding_wpe_backward_kernel<<<static_cast<int>((tc + 255) / 256), 256, 0, stream>>>(dwpe, dout,
                                                                                        B, Tn, C);
  RY_CUDA_LAUNCHED();
}

#define RY_INSTANTIATE(T)                                                                      \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int,    \
                                     cudaStream_t);                                            \
  template void embedding_backward<T>(float*, float*, const T*, const int32_t*, int, int, int, \
                                      cudaStream_t);
RY_INSTANTIATE(float)
RY_INSTANTIATE(bf16)
#undef RY_INSTANTIATE

}  // namespace railyard::cuda
