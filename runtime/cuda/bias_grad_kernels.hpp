#pragma once
// The bias gradient of a Linear layer: column sums of dY, in two fixed-order passes (per-chunk
// partials, then their sum), so the result has the same bits every run. The engine forms the qkv
// and fc bias gradients in their weight products (ones_column_kernels.hpp) and the projections'
// in the LayerNorm backward; this is that backward's fallback for rows too wide to sum there.

#include <cuda_runtime.h>

#include <cstddef>

namespace railyard::cuda {

// Floats of scratch bias_grad needs for dy [N, O].
size_t bias_grad_partials(int N, int O);

// db[o] (+= with accumulate, else =) sum over rows n of dy[n, o]; dy is [N, O], db fp32.
// `partials` holds bias_grad_partials(N, O) floats.
template <typename T>
void bias_grad(float* db, float* partials, const T* dy, int N, int O, bool accumulate,
               cudaStream_t stream);

}  // namespace railyard::cuda
