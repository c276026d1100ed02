#pragma once
// A Linear layer's bias gradient from its weight gradient's product (issue 12). The layer's
// input X [N, I] is stored at a row stride ld = ones_column_ld(I) whose column I holds 1 and the
// columns after it 0; then one product dY^T X' [O, ld] (fp32) holds dW in its columns 0..I-1 and
// the bias gradient, sum over n of dY[n, o], in column I: no pass of its own over dY. The sum is
// the product's, in its fixed order (Matmul allows only fixed-order split-K), so the bits are
// the same every run.

#include <cuda_runtime.h>

namespace railyard::cuda {

// Padding after the I columns of a row: the ones column, then zeros up to a 16-byte row in bf16
// and fp32 (cuBLASLt's fast paths want every row on a 16-byte boundary).
inline constexpr int kOnesColumnPad = 8;
constexpr int ones_column_ld(int I) {
  return I + kOnesColumnPad;
}
// Where such rows are stored, their stride: ones_column_ld(I) rounded up to kOnesColumnRowAlign
// elements (64: 128 bytes of bf16), so that every row of the products' operands starts on a
// 128-byte line (at 776 elements apart, seven rows in eight straddle one line more per TMA box
// row). The products still read only ones_column_ld(I) columns. 8: the rows packed at 776.
inline constexpr int kOnesColumnRowAlign = 64;
constexpr int ones_column_row_stride(int I) {
  return (ones_column_ld(I) + kOnesColumnRowAlign - 1) / kOnesColumnRowAlign * kOnesColumnRowAlign;
}

// Columns I..ld-1 of every row of x [N, ld] (ld: the row stride): 1 at column I, 0 after it. Run
// once when the buffer is allocated: whatever writes x afterwards writes only columns 0..I-1.
template <typename T>
void set_ones_column(T* x, int N, int I, int ld, cudaStream_t stream);

// prod [O, ld] (fp32, the product dY^T X') split into dw [O, I] and db [O] (fp32): written, or
// added to with accumulate (micro-steps after the first). Elementwise: no sums of its own.
// With sumsq: also the sum of squares of the values written (the gradient norm's share of dw
// and db, issue 12), per block of rows into sumsq[0, split_sumsq_slots(O)), each slot written
// every call, in a fixed order (fp32 per thread and warp, the warps' sums in double); needs
// 16-byte packs (I and ld multiples of 4, dw and prod 16-byte aligned), else throws
// std::invalid_argument.
void split_ones_column_product(float* dw, float* db, const float* prod, int O, int I, int ld,
                               bool accumulate, cudaStream_t stream, double* sumsq = nullptr);
// The slots split_ones_column_product fills for O rows with sumsq.
int split_sumsq_slots(int O);

}  // namespace railyard::cuda
