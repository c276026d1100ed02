#pragma once
// A Linear layer's weight and bias gradients from one product over its input with the ones
// column (ones_column_kernels.hpp), issued either way round: dY^T X' [O, ld], or X'^T dY [ld, O]
// where cuBLASLt's tiles fit the shape better (the engine's choice per product follows the GEMM
// survey, bench/NOTES.md issue 12). Either way the product is exactly the one
// Matmul::backward_weight_call builds for those operands, so the survey's timings and the pin
// table apply to it.

#include <cuda_runtime.h>

#include "matmul_cublaslt.hpp"
#include "ones_column_kernels.hpp"

namespace railyard::cuda {

// The product's call: dy [N, O] and x [N, ld] (type t, ld = ones_column_ld(I)) into scratch
// (fp32, O * ld values) laid out as `layout`, always overwritten.
GemmCall ones_column_product_call(float* scratch, const void* dy, const void* x, int N, int I,
                                  int O, cudaDataType_t t, OnesColumnLayout layout);

// dw [O, I] and db [O] (fp32; written, or added to with accumulate): the product into scratch,
// then the split.
void ones_column_weight_bias_grad(Matmul& mm, float* dw, float* db, float* scratch, const void* dy,
                                  const void* x, int N, int I, int O, cudaDataType_t t,
                                  OnesColumnLayout layout, bool accumulate, cudaStream_t stream);

}  // namespace railyard::cuda
