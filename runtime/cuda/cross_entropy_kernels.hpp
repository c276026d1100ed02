#pragma once
// Softmax cross-entropy over the LM head's logits, fused with its gradient: each row's
// probabilities are formed in registers and written back as dlogits over the logits, so no
// probability tensor is ever stored.

#include <cuda_runtime.h>

#include <cstdint>

namespace railyard::cuda {

// logits [N, Vp]; columns >= V are padding and get gradient 0. losses[n] = -log p(target); a
// negative target is ignored (loss 0, gradient 0). With write_grad, logits become dscale * (softmax
// - onehot(target)).
// With the gradient, a row that fits the device's shared memory per block is read from device
// memory once (staged there by its block, the block's next row copied in behind the gradient's
// writes); a longer one is read twice. Both sum each row in one fixed order (no atomics): the
// same bits run to run. Throws std::invalid_argument unless Vp * sizeof(T) is a multiple of 16
// and logits is 16-byte aligned.
template <typename T>
void cross_entropy_forward_backward(T* logits, float* losses, const int32_t* targets, int N, int V,
                                    int Vp, float dscale, bool write_grad, cudaStream_t stream);

// How many rows of Vp columns of T cross_entropy_forward_backward stages per multiprocessor at once
// on the current device (one per block, as many blocks as fit: 2 for GPT-2's bf16 rows on an
// H100/H200), or 0 where a row does not fit (rows read twice).
template <typename T>
int cross_entropy_staged_rows(int Vp);

}  // namespace railyard::cuda
