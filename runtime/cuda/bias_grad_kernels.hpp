#pragma once
// The bias gradient of a Linear layer: column sums of dY, in two fixed-order passes (per-chunk
// partials, then their sum), so the result has the same bits every run.

#include <cuda_runtime.h>

#include <cstddef>

#include "fixed_order_sum.hpp"

namespace railyard::cuda {

// Floats of scratch bias_grad needs for dy [N, O].
size_t bias_grad_partials(int N, int O);

// db[o] (+= with accumulate, else =) sum over rows n of dy[n, o]; dy is [N, O], db fp32.
// `partials` holds bias_grad_partials(N, O) floats.
template <typename T>
void bias_grad(float* db, float* partials, const T* dy, int N, int O, bool accumulate,
               cudaStream_t stream);

// bias_grad's first pass alone: launches the per-chunk sums into `partials` and returns the
// second pass, which the caller runs later (sum_partial_columns, alone or merged with another
// reduction's) before reusing `partials` or reading db. Same bits as bias_grad.
template <typename T>
ColumnSums bias_grad_first_pass(float* db, float* partials, const T* dy, int N, int O,
                                bool accumulate, cudaStream_t stream);

}  // namespace railyard::cuda
