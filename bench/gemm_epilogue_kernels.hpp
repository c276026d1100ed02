#pragma once
// Kernels only the GEMM epilogue bench (gemm_epilogue_bench.cpp) uses: the GELU derivative
// applied after a plain product, fused with the first pass of the bias gradient, so that
// "plain product + one elementwise pass" can be timed against cuBLASLt's DGELU epilogues.
// Not part of the runtime: if the bench shows this path wins, it moves to runtime/cuda.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace railyard::bench {

// Row chunks of the first pass: partials has dgelu_colsum_chunks(N) rows of I floats.
int dgelu_colsum_chunks(int N);

// dx[n, i] = bf16(dp[n, i] * GELU'(pre[n, i])) (GPT-2's tanh GELU), and partials[c, i] = sum of
// dx[n, i] (as rounded to bf16) over the rows n of chunk c, in the same fixed grouping as
// runtime/cuda's bias_grad, so sum_partial_columns finishes the same bias gradient bit for bit.
// All of [N, I] row-major; I a multiple of 8, rows 16-byte aligned.
void dgelu_colsum(__nv_bfloat16* dx, float* partials, const __nv_bfloat16* dp,
                  const __nv_bfloat16* pre, int N, int I, cudaStream_t stream);

// An empty kernel launched before each variant in the bench's --once mode, so a kernel list
// from a profiler (ncu) can be cut into the variants' launches.
void launch_marker(cudaStream_t stream);

}  // namespace railyard::bench
