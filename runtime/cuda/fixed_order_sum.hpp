#pragma once
// Column sums of per-block partial results in a fixed order: the second pass of every reduction
// whose first pass runs in many blocks. Float atomics would make such sums depend on the order
// in which blocks finish; writing partials and summing them here gives the same bits every run.

#include <cuda_runtime.h>

#include <vector>

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

// Several second passes in one launch (kColumnSumsPerLaunch a launch; more take more launches),
// each summed exactly as sum_partial_columns sums it, so with the same bits: for reductions
// whose outputs nothing reads before the last of them is due (gradients only the optimizer
// reads), deferred to save a launch each. Each keeps its own partials until this runs, and no
// two write the same output element.
inline constexpr int kColumnSumsPerLaunch = 32;
void sum_partial_columns(const std::vector<ColumnSums>& batch, cudaStream_t stream);

}  // namespace railyard::cuda
