#pragma once
// Column sums of per-block partial results in a fixed order: the second pass of every reduction
// whose first pass runs in many blocks. Float atomics would make such sums depend on the order
// in which blocks finish; writing partials and summing them here gives the same bits every run.

#include <cuda_runtime.h>

namespace railyard::cuda {

inline constexpr int kMaxColumnSumOutputs = 3;

// The second pass of one reduction: partials [rows, cols] (row-major) summed per column over
// rows, in row order within fixed lanes; column c goes to out[c / width][c % width] (cols is at
// most kMaxColumnSumOutputs widths), added to it with accumulate, else overwriting it.
struct ColumnSums {
  const float* partials = nullptr;
  int rows = 0, cols = 0, width = 0;
  float* out[kMaxColumnSumOutputs] = {};
  bool accumulate = false;
};

void sum_partial_columns(const ColumnSums& sums, cudaStream_t stream);

}  // namespace railyard::cuda
