#pragma once
// Sum of squares of the fp32 gradients, the input of global-norm clipping, in two fixed-order
// passes: each slice of the gradients leaves per-block sums in its own slots, then one block
// adds all the slots in a fixed order. Slices can run on any stream, in any order or at the
// same time (the slots are apart); the norm, and the clip factor, has the same bits every run.

#include <cuda_runtime.h>

#include <cstddef>

namespace railyard::cuda {

// Slots (doubles) grad_sumsq_slice fills for a slice of n elements run on at most max_blocks
// blocks: a function of n and max_blocks only, so the partition is fixed.
size_t grad_sumsq_slots(size_t n, size_t max_blocks);
// The block count that fills the whole GPU: a slice on the critical path.
size_t grad_sumsq_full_blocks();
// slots[0, grad_sumsq_slots(n, max_blocks)) = per-block sums of g[i]^2 over the n elements.
void grad_sumsq_slice(double* slots, const float* g, size_t n, size_t max_blocks,
                      cudaStream_t stream);
// *out = slots[0] + ... + slots[count - 1], in a fixed order (strided per thread, then a tree).
void sum_slots(double* out, const double* slots, size_t count, cudaStream_t stream);
// *scale = min(1, clip / (sqrt(*sumsq) + 1e-6)) in double, as railyard::clip_factor; 1 when
// clip <= 0.
void clip_factor_on_device(float* scale, const double* sumsq, float clip, cudaStream_t stream);

}  // namespace railyard::cuda
