#pragma once
// GPT-2's GELU (tanh approximation), elementwise, for --recompute (training fuses it into
// the MLP products' epilogues). n must be a multiple of 8.

#include <cuda_runtime.h>

#include <cstddef>

namespace railyard::cuda {

template <typename T>
void gelu_forward(T* out, const T* in, size_t n, cudaStream_t stream);

}  // namespace railyard::cuda
