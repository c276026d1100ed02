#pragma once
// Softmax cross-entropy over the LM head's logits, fused with its gradient: each row's
// probabilities are formed in registers and written back as dlogits over the logits, so no
// probability tensor is ever stored.

#include <cuda_runtime.h>

#include <cstdint>

namespace railyard::cuda {

// How the staged kernel (rows that fit shared memory, with the gradient) forms its exponentials
// and how wide its blocks are; cross_entropy_bench times each, gpu_kernels_check checks each.
// - kTwice: blocks of 512 threads; an online (max, sum) pass, then the gradient's pass computes
//   each exponential again (the kernel before issue 12's ce branch: two MUFU instructions per
//   logit).
// - kOnce: blocks of 512; each thread takes the max of its own staged columns, then stores
//   exp(x - that max) over the staged logits (fp16, scaled by 2^15, in bf16 rows) while summing
//   it; the gradient multiplies the stored value by one factor per thread: one MUFU per logit.
// - kOnceWide: kOnce in blocks of 1024 threads (still a row per block, two blocks a
//   multiprocessor where they fit: twice the threads to cover the latencies, 32 registers each).
// - kTwicePacked: kTwice with the gradient's exponentials two per instruction (ex2.approx.f16x2,
//   about a bf16 unit in the last place): bf16 rows only, fp32 rows run kTwice's arithmetic.
enum class CrossEntropyStaged { kTwice, kOnce, kOnceWide, kTwicePacked };
// The engine's choice; switch here if cross_entropy_bench measures another variant faster.
inline constexpr CrossEntropyStaged kCrossEntropyStaged = CrossEntropyStaged::kOnce;
const char* cross_entropy_staged_name(CrossEntropyStaged how);

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
                                    int Vp, float dscale, bool write_grad, cudaStream_t stream,
                                    CrossEntropyStaged how = kCrossEntropyStaged);

// How many rows of Vp columns of T cross_entropy_forward_backward stages per multiprocessor at once
// on the current device (one per block, as many blocks as fit: 2 for GPT-2's bf16 rows on an
// H100/H200), or 0 where a row does not fit (rows read twice); and the threads of a block.
template <typename T>
int cross_entropy_staged_rows(int Vp, CrossEntropyStaged how = kCrossEntropyStaged);
int cross_entropy_staged_threads(CrossEntropyStaged how);

}  // namespace railyard::cuda
