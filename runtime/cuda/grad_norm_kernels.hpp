#pragma once
// Sum of squares of the fp32 gradients, the input of global-norm clipping, in two fixed-order
// passes: each slice of the gradients leaves per-block sums in its own slots, then one block
// adds all the slots in a fixed order. Slices can run on any stream, in any order or at the
// same time (the slots are apart); the norm, and the clip factor, has the same bits every run.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

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
// A part of the gradients that grad_sumsq_ranges reads, in 16-byte packs [begin4, end4), cut
// into fixed tiles (16 KB); first_tile: the tiles of the parts before it.
struct SumsqRange {
  uint64_t begin4, end4, first_tile;
};
// The table of the element ranges `parts` (each begin and end a multiple of 4; empty ones left
// out), in their order, then a sentinel whose first_tile is the number of tiles. Throws
// std::invalid_argument on a range off a 16-byte boundary.
std::vector<SumsqRange> sumsq_range_table(const std::vector<std::pair<size_t, size_t>>& parts);
// Slots grad_sumsq_ranges fills: a block per tile up to grad_sumsq_full_blocks(), then one per
// kernel-made chunk of `done` slots. A function of the table and `done` only: a fixed partition.
size_t grad_sumsq_ranges_slots(size_t tiles, size_t done);
// For the norm when some gradients come summed already (the kernels that wrote them left
// per-block sums of squares, `done` doubles): slots[0, grad_sumsq_ranges_slots(tiles, done)) =
// per-block sums of g[i]^2 over the table's ranges (ranges: the device copy of
// sumsq_range_table's, count + 1 entries; g 16-byte aligned), then fixed-order sums of fixed
// chunks of done_slots, in the same launch. Then sum_slots gives the whole sum.
void grad_sumsq_ranges(double* slots, const float* g, const SumsqRange* ranges, size_t tiles,
                       const double* done_slots, size_t done, cudaStream_t stream);
// *scale = min(1, clip / (sqrt(*sumsq) + 1e-6)) in double, as railyard::clip_factor; 1 when
// clip <= 0.
void clip_factor_on_device(float* scale, const double* sumsq, float clip, cudaStream_t stream);
// grad_sumsq_ranges, sum_slots(sumsq, slots, ...) and clip_factor_on_device(scale, sumsq, clip)
// in one launch, the same bits as the three: the block that finishes last (counted in *ticket,
// device memory that is zero before the launch; the launch leaves it zero) adds every block's
// slot in sum_slots' order and writes the clip factor. Saves two launches and the idle time
// around them between the backward and the update. Launches on one ticket must not overlap (one
// stream). Throws std::invalid_argument when there is nothing to sum (no tiles, no done slots).
void grad_sumsq_ranges_clip(double* sumsq, float* scale, float clip, unsigned* ticket,
                            double* slots, const float* g, const SumsqRange* ranges, size_t tiles,
                            const double* done_slots, size_t done, cudaStream_t stream);

}  // namespace railyard::cuda
