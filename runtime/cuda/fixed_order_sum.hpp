#pragma once
// Column sums of per-block partial results in a fixed order: the second pass of every reduction
// whose first pass runs in many blocks. Float atomics would make such sums depend on the order
// in which blocks finish; writing partials and summing them here gives the same bits every run.

#include <cuda_runtime.h>

namespace railyard::cuda {

// For each column c of partials [rows, cols] (row-major): s = sum over rows, in row order
// within fixed lanes. Columns below `split` go to out_lo[c], the rest to out_hi[c - split];
// accumulate adds to the output, else overwrites it.
void sum_partial_columns(float* out_lo, float* out_hi, int split, const float* partials, int rows,
                         int cols, bool accumulate, cudaStream_t stream);

}  // namespace railyard::cuda
