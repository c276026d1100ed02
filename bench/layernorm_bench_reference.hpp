#pragma once
// The engine's LayerNorm backward before issue 12's third LayerNorm change (commit 2877015: the
// register kernel; the forward of then is the engine's now, less the residual add) and its
// embedding backward before issue 12 (commit 2f880da), kept here only so that layernorm_bench
// can time the engine's kernels beside them and compare results.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace railyard::bench {

// The first pass of layernorm_backward at 2877015 for bf16 rows of C = 768: dx and one row of
// partials per block, [blocks][(sum ? 3 : 2) C]; returns the blocks (the rows of partials).
int reference_layernorm_backward_first_pass(__nv_bfloat16* dx, float* partials,
                                            const __nv_bfloat16* dy, const __nv_bfloat16* x,
                                            const __nv_bfloat16* w, const float* mean,
                                            const float* rstd, int N, int C, bool accumulate,
                                            bool sum, cudaStream_t stream);

// Scratch bytes of reference_embedding_backward (positions, sorted keys and positions, CUB's).
size_t reference_embedding_scratch_bytes(int N, int vocab);
// The stable sort of positions by token (the same in both versions), alone.
void reference_embedding_sort(void* scratch, const int32_t* tokens, int N, int vocab,
                              cudaStream_t stream);
// embedding_backward at 2f880da: the sort, then one block per sorted entry for dwte and one
// thread per (t, c) for dwpe.
void reference_embedding_backward(float* dwte, float* dwpe, void* scratch,
                                  const __nv_bfloat16* dout, const int32_t* tokens, int B, int Tn,
                                  int C, int vocab, bool accumulate_wpe, cudaStream_t stream);

}  // namespace railyard::bench
