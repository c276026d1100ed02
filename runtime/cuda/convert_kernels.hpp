#pragma once
// Elementwise type conversion between fp32 master copies and the compute type.

#include <cuda_runtime.h>

#include <cstddef>

namespace railyard::cuda {

template <typename To, typename From>
void convert(To* out, const From* in, size_t n, cudaStream_t stream);

}  // namespace railyard::cuda
