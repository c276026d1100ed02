#pragma once
// Softmax cross-entropy over the LM head's logits, fused with its gradient: each row's
// probabilities are formed in registers and written back as dlogits over the logits, so no
// probability tensor is ever stored.

#include <cuda_runtime.h>

#include <cstdint>

namespace railyard::cuda {

// How a row is read with the gradient (issue 12; cross_entropy_bench times each side by side,
// gpu_kernels_check checks each):
// - kStaged: a row per block of 512 threads, staged in shared memory by cp.async (2 blocks a
//   multiprocessor for GPT-2's bf16 rows), the next row copied in behind the gradient's writes.
// - kCluster2, kCluster4: a row split over a cluster of 2 (4) blocks of 256 (128) threads, each
//   staging its slice as kStaged does (4 (8) blocks a multiprocessor); the blocks' (max, sum)
//   pairs meet through distributed shared memory behind one cluster barrier a row.
// - kL2Pair, kL2Wide: no staging; a row per block read once from device memory (L2 evict-last)
//   for the sums and again from L2 (evict-first) for the gradient, 2 blocks of 512 (1 of 1024)
//   a multiprocessor: 26 (13) MB of rows in L2 at once.
// Where a variant cannot run (a slice above the shared memory) kStaged's path runs.
enum class CrossEntropyStaged { kStaged, kCluster2, kCluster4, kL2Pair, kL2Wide };
// The engine's choice; switch here if cross_entropy_bench measures another variant faster.
inline constexpr CrossEntropyStaged kCrossEntropyStaged = CrossEntropyStaged::kStaged;
const char* cross_entropy_variant_name(CrossEntropyStaged how);

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
// H100/H200), or 0 where a row does not fit (rows read twice).
template <typename T>
int cross_entropy_staged_rows(int Vp);

// Whether variant `how` itself runs for rows of Vp columns of T on the current device (kStaged:
// always; otherwise false where cross_entropy_forward_backward falls back to kStaged's path).
template <typename T>
bool cross_entropy_variant_runs(int Vp, CrossEntropyStaged how);

}  // namespace railyard::cuda
