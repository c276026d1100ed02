#pragma once
// Staggered workspaces, so that a library's own memsets in them can leave a step graph. cuDNN's
// attention zeroes a few bytes of the workspace we pass before its kernels, every call (GPT-2's
// step: 12 forward and 12 backward calls, each memset a ~1.6 us kernel in the step's graphs).
// hoist_scratch_memsets (graph_memsets.hpp) can zero such bytes once at the graph's head instead,
// but only where no node touches them before their memset; with one workspace shared by every
// layer, every earlier call does. Giving the calls, in the order they run, workspaces at offsets
// spaced so that no earlier call's workspace reaches a later call's memsets makes each memset's
// bytes its own until it runs. Where in the workspace the memsets lie is learnt at run time (a
// captured call: attention_stagger.hpp); everything here is pure.
//
// Two orders, for memsets near the workspace's start or near its end. A call's memsets lie in
// its workspace's [lo, hi); with n calls of a workspace of W bytes:
// - later calls lower: call j at (n-1-j) a with a >= hi, so every earlier call's workspace starts
//   at or above call j's + a, past its memsets; the memsets all lie in [0, n a);
// - later calls higher: call j at j a with a >= W - lo, so every earlier call's workspace ends at
//   or below call j's + W - a, short of its memsets; the memsets all lie in the extent's last n a.
// The order with the smaller stride a (a multiple of kStaggerAlign) is taken; none ("keep": the
// calls share one workspace, their memsets stay where they are) where n a exceeds the budget.

#include <cstddef>
#include <string>
#include <vector>

namespace railyard::cuda {

// Bytes [begin, end).
struct ByteSpan {
  size_t begin = 0, end = 0;
  bool overlaps(const ByteSpan& o) const { return begin < o.end && o.begin < end; }
  bool operator==(const ByteSpan&) const = default;
};

// Workspace offsets stay on the alignment of the allocation plan's buffers.
inline constexpr size_t kStaggerAlign = 256;

enum class StaggerOrder { kKeep, kLaterLower, kLaterHigher };

struct Stagger {
  StaggerOrder order = StaggerOrder::kKeep;
  size_t stride = 0;
  std::string why;  // with kKeep: the reason, for the run's report

  // Call `call`'s workspace (of `calls`, in run order) from the start of their extent.
  size_t offset(int call, int calls) const;
  // The bytes the calls' workspaces of `workspace` bytes span together.
  size_t extent(int calls, size_t workspace) const;
  // "256 B apart, later lower", or "kept (<why>)".
  std::string describe() const;
};

// The stagger of `calls` calls whose workspace of `workspace` bytes holds `memsets` (spans
// inside it, as one call issues them), within `budget` bytes (calls x stride); kKeep with the
// reason where there are no memsets, one lies outside the workspace, or the budget is too small.
Stagger plan_stagger(int calls, size_t workspace, const std::vector<ByteSpan>& memsets,
                     size_t budget);

// One kind of call (the attention's forward or backward) placed in a region: its stagger, the
// start of the calls' extent in the region, its workspace bytes and one call's memsets in it.
struct StaggeredCalls {
  Stagger stagger;
  size_t base = 0, workspace = 0;
  std::vector<ByteSpan> memsets;

  // Call `call`'s workspace offset in the region.
  size_t offset(int call, int calls) const { return base + stagger.offset(call, calls); }
  // Call `call`'s workspace, and its memsets, in the region's bytes.
  ByteSpan workspace_of(int call, int calls) const;
  std::vector<ByteSpan> memsets_of(int call, int calls) const;
};

// Places the calls' extent in a region of `region` bytes: at its start where later calls are
// lower (their memsets near the region's start), at its end where later calls are higher (near
// the region's end); kKeep at the start. Returns false, leaving `c` alone, where it does not fit.
bool place_in_region(StaggeredCalls& c, int calls, size_t region);

// Where a buffer of `bytes` that must avoid the calls' memsets goes in the region: at the end
// opposite them (the region's end where the calls are placed at its start).
size_t place_apart(const StaggeredCalls& c, size_t bytes, size_t region);

// True where the memsets of every call (in run order: memsets[j] is call j's) overlap no
// workspace of an earlier call and none of `others` (buffers other nodes write meanwhile).
bool memsets_exclusive(const std::vector<ByteSpan>& workspaces,
                       const std::vector<std::vector<ByteSpan>>& memsets,
                       const std::vector<ByteSpan>& others);

}  // namespace railyard::cuda
