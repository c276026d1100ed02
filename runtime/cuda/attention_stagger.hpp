#pragma once
// The staggered workspaces of the attention's calls (memset_stagger.hpp says why), decided at
// run time from what the library really does. For each kind of call (forward, backward): one
// call runs eagerly (the library loads what it loads lazily), then is captured into a graph that
// is never launched, whose memset nodes say where in the workspace its memsets lie; the stagger
// and the calls' place in the region follow (plan_stagger, place_in_region). Then every call is
// captured again at its own staggered workspace, and the stagger is kept only where each call's
// memsets come before its other work, are where the first probe put them (moved with the
// workspace) and overlap neither an earlier call's workspace nor the region's other buffer
// (place_apart). Nothing is assumed of the library's version: where
// anything differs, that kind of call keeps one shared workspace, as without the stagger.

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "graph_memsets.hpp"
#include "memset_stagger.hpp"

namespace railyard::cuda {

// One kind of call: `calls` calls in run order, each of `workspace` bytes; launch(j, offset)
// queues call j on the stream with its workspace at `offset` in the region. `guarded`: the
// region's other buffer (placed by place_apart) is live among these calls, so their memsets
// must avoid it.
struct WorkspaceCalls {
  std::string name;
  int calls = 0;
  size_t workspace = 0;
  bool guarded = false;
  std::function<void(int call, size_t offset)> launch;
};

struct WorkspaceStagger {
  std::vector<std::string> names;
  std::vector<StaggeredCalls> kinds;  // as the WorkspaceCalls were given
  size_t apart = 0;                   // the other buffer's offset in the region
  // Per kind, every call's memsets in device bytes where it staggers (else none).
  std::vector<std::vector<ScratchRange>> hoist;
  // "fwd 256 B apart, later lower; bwd kept (<why>)"
  std::string describe() const;
};

// The stagger of `kinds` in [region, region + region_bytes), whose other buffer takes
// `apart_bytes` (it goes opposite the memsets of the first guarded kind); at most `budget` bytes
// of stagger a kind. Queues (and captures) calls on
// `stream`, which must not be capturing. Throws std::runtime_error on a CUDA error.
WorkspaceStagger stagger_workspaces(cudaStream_t stream, void* region, size_t region_bytes,
                                    size_t apart_bytes, size_t budget,
                                    const std::vector<WorkspaceCalls>& kinds);

}  // namespace railyard::cuda
