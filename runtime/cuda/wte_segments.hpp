#pragma once
// The plan of the segmented wte backward (embedding_kernels.cu): the sorted batch (TokenOrder)
// is cut every kWteSegmentRows entries, whatever the tokens, so a run of one token longer than a
// segment is summed in pieces in parallel. A piece is summed in sorted order from its first row;
// a run in one piece is added to its wte row at once; a run over several leaves its pieces in a
// scratch of partials (two rows a segment: the run continued from the segment before, the run
// continued into the next), which a second kernel adds in order, in kCombineGroups contiguous
// parts summed side by side and then in order, to the wte row. The order depends only on the
// sorted tokens: the same bits every run, no float atomics. Host and device share these shapes.

#include <cstddef>

// The kernels call these too; host-only code (tests) compiles them without CUDA.
#if defined(__CUDACC__)
#define RY_WTE_SEGMENTS_FN __host__ __device__ constexpr
#else
#define RY_WTE_SEGMENTS_FN constexpr
#endif

namespace railyard::cuda {

inline constexpr int kWteSegmentRows = 8;
// Threads of a segment's block at most (kWteSegmentRows entries, their packs side by side): two
// blocks a multiprocessor.
inline constexpr int kWteSegmentThreads = 768;
// Parts of a long run's partials summed side by side by the combine, then added in order.
inline constexpr int kCombineGroups = 4;
// float4 columns a combine block's group takes at once, at most.
inline constexpr int kCombineColumns = 192;
// Segments a combine block takes one after another (most have no run to combine).
inline constexpr int kCombineSegments = 4;

RY_WTE_SEGMENTS_FN int wte_segments(int entries) {
  return (entries + kWteSegmentRows - 1) / kWteSegmentRows;
}

// Floats of the scratch of partials: two rows of C a segment.
constexpr size_t wte_partials_floats(int entries, int C) {
  return size_t(2) * size_t(wte_segments(entries)) * size_t(C);
}

// `items` shared by at most `most` threads: the threads and the passes each makes, as even as
// the passes allow (96 packs of GPT-2's bf16 rows: 96 threads, one pass).
struct SplitShape {
  int threads, passes;
};
constexpr SplitShape split_items(int items, int most) {
  const int passes = (items + most - 1) / most;
  return {(items + passes - 1) / passes, passes};
}

// The first of `count` partials in part j of kCombineGroups (contiguous, in order; some empty
// when count < kCombineGroups).
RY_WTE_SEGMENTS_FN int combine_part_begin(int j, int count) {
  return j * count / kCombineGroups;
}

}  // namespace railyard::cuda
