#include "ones_column_product.hpp"

namespace railyard::cuda {

GemmCall ones_column_product_call(float* scratch, const void* dy, const void* x, int N, int I,
                                  int O, cudaDataType_t t, OnesColumnLayout layout) {
  const int ld = ones_column_ld(I);
  // The transpose is the weight gradient of a Linear from O inputs (dy) to ld outputs (x).
  if (layout == OnesColumnLayout::kInputsByOutputs) {
    return Matmul::backward_weight_call(scratch, x, dy, N, O, ld, t, false);
  }
  return Matmul::backward_weight_call(scratch, dy, x, N, ld, O, t, false);
}

void ones_column_weight_bias_grad(Matmul& mm, float* dw, float* db, float* scratch, const void* dy,
                                  const void* x, int N, int I, int O, cudaDataType_t t,
                                  OnesColumnLayout layout, bool accumulate, cudaStream_t stream) {
  // The product always overwrites its scratch; the split adds to the gradients where accumulate.
  mm.gemm(ones_column_product_call(scratch, dy, x, N, I, O, t, layout), stream);
  split_ones_column_product(dw, db, scratch, O, I, ones_column_ld(I), layout, accumulate, stream);
}

}  // namespace railyard::cuda
