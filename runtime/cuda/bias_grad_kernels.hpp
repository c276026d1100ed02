#pragma once
// The bias gradient of a Linear layer: column sums of dY.

#include <cuda_runtime.h>

namespace railyard::cuda {

// db[o] += sum over rows n of dy[n, o]; dy is [N, O], db fp32.
template <typename T>
void bias_grad(float* db, const T* dy, int N, int O, cudaStream_t stream);

}  // namespace railyard::cuda
