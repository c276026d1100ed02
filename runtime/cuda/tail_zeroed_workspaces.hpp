#pragma once
// Workspaces for products that zero the end of theirs before every launch (CUTLASS's stream-K
// barriers: weight_grad_cutlass.hpp), laid out so that a captured graph's zeroing memsets can go
// to its head, all in one kernel (hoist_scratch_memsets, graph_memsets.hpp), instead of standing
// between the products (~1.1 us each on the critical path as kernels).
//
// The memory holds two parts. The eager region (`largest` bytes): calls outside a capture, and a
// capture that ran out of room (a warning, once), their memsets where they are. The arena
// (arena()): each capture hands out workspaces afresh, in order, so that a call's zeroed tail
// starts at or after the end of every workspace handed out before it in that capture (its other
// bytes may lie over earlier calls' bytes, which the products write before they read). So within
// one graph no tail overlaps another, no node touches a tail's bytes before its memset, and
// nothing reads what the arena held before the graph began: hoist_scratch_memsets's promises,
// kept as long as the graphs that use the arena run one at a time (the engine's: all on its one
// stream) and nothing else uses it meanwhile.

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace railyard::cuda {

class TailZeroedWorkspaces {
 public:
  // The bytes for workspaces of at most `largest` bytes whose zeroed tails are at most `tail`
  // bytes, `calls` of them per capture.
  static size_t bytes_for(size_t largest, size_t tail, size_t calls);
  // Over [base, base + bytes_for(largest, tail, calls)), which the caller owns.
  TailZeroedWorkspaces(void* base, size_t largest, size_t tail, size_t calls);

  struct Workspace {
    void* ptr;
    size_t bytes;
  };
  // A workspace of `need` bytes (at most `largest`) whose last `tail` bytes at most (at most the
  // constructor's) the call zeroes before its launch on `stream`; 256-byte aligned. Throws
  // std::invalid_argument where `need` or `tail` exceeds what the memory was sized for.
  Workspace take(size_t need, size_t tail, cudaStream_t stream);

  size_t largest() const { return largest_; }
  // The arena (start, bytes): the range whose memsets StepGraphs may hoist.
  std::pair<const void*, size_t> arena() const { return {arena_, arena_bytes_}; }

 private:
  static constexpr size_t kAlign = 256;
  char* eager_;
  char* arena_;
  size_t largest_, tail_, arena_bytes_;
  unsigned long long capture_id_ = 0;  // the capture whose workspaces end at frontier_
  size_t frontier_ = 0;                // bytes of the arena handed out in that capture
  bool full_logged_ = false;
};

}  // namespace railyard::cuda
