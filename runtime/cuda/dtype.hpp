#pragma once
// The element types the CUDA engine computes in, and their cuBLASLt names.

#include <cuda_bf16.h>
#include <library_types.h>

#include <type_traits>

namespace railyard::cuda {

using bf16 = __nv_bfloat16;

template <typename T>
constexpr cudaDataType_t cuda_dtype() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>, "float or bf16 only");
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

}  // namespace railyard::cuda
