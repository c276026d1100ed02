#pragma once
// Small memsets in a captured step graph run as kernels instead. cuBLASLt (the persistent nvjet
// products zero a tile counter in their workspace), cuDNN and CUB issue a cudaMemsetAsync of a
// few bytes before many of their kernels; captured, each becomes a memset node, and a memset
// node between two kernels costs 3-4 us of idle GPU (the H200's step timeline: 120 memsets,
// 92 us busy, 420 us idle next to them), against about 1 us between two kernel nodes.
//
// replace_small_memsets rewrites `graph` (captured, not yet instantiated): every memset node of
// at most kMaxReplacedBytes whose edges are all plain (full completion) dependencies becomes a
// kernel node that writes the same value to the same elements, with the same dependencies and
// dependents. Larger memsets, and any node with other kinds of edges, stay as they are. The
// results are the same bits: a memset writes constants, whichever engine writes them.
//
// hoist_scratch_memsets goes further for memsets into scratch ranges the caller names (Matmul's
// workspace slots, matmul_cublaslt.hpp; the bytes cuDNN's attention zeroes in its staggered
// workspaces, memset_stagger.hpp): there a memset of zeros is not needed where it stands. It
// rewrites `graph`: every memset node of zeros that lies wholly inside a range, writes
// consecutive bytes, overlaps no other such memset and has only plain edges goes, its
// dependencies now leading straight to its dependents; one kernel node (per 32 ranges with
// memsets removed), before every other node of the graph, zeroes for each range the span from
// its first removed memset's bytes to its last one's. The caller promises, for every launch of the
// graph and every range: nothing reads what the range held before the launch (a node that reads its
// bytes wrote them first, or a removed memset did), nothing outside the graph touches it while the
// graph runs, and the bytes of each such memset are touched by no other node of the graph before
// the memset. Then every node finds the same bytes as before the rewrite, so the results are the
// same bits, and the step saves one memset per product or attention call (1.1 us each on the
// critical path as a kernel) for one zeroing kernel.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace railyard::cuda {

inline constexpr size_t kMaxReplacedBytes = size_t(1) << 20;

// Device bytes [base, base + bytes).
struct ScratchRange {
  const void* base = nullptr;
  size_t bytes = 0;
};

// The bytes [first, second) of device memory `m` writes where it writes zeros to consecutive
// bytes (a flat memset, or rows whose pitch is their width); none otherwise.
std::optional<std::pair<uintptr_t, uintptr_t>> zeroed_bytes(const cudaMemsetParams& m);

// The nodes of `graph` (cudaGraphGetNodes, sized first). Throws std::runtime_error on a CUDA error.
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph);

// How many memset nodes became kernels. Throws std::runtime_error (naming the CUDA call) if
// the graph cannot be read or rewritten; the caller then runs without graphs.
size_t replace_small_memsets(cudaGraph_t graph);

// How many memset nodes went, per range of `ranges` (a memset inside several counts for the
// first; none at all: the graph is unchanged). Run it before replace_small_memsets, whose kernel
// nodes it does not look at. Throws as that does.
std::vector<size_t> hoist_scratch_memsets(cudaGraph_t graph,
                                          const std::vector<ScratchRange>& ranges);

// A memset node of a captured launch; `leading`: every node it waits for, directly or not, is a
// memset too (none of the launch's other work runs before it).
struct CapturedMemset {
  cudaMemsetParams params{};
  bool leading = false;
};

// The memset nodes `launch` (queueing its work on `stream`) would put in a graph: captured into
// one that is never launched, then dropped. `launch` must be capturable (run it eagerly once
// first where it loads or builds anything lazily). Throws std::runtime_error on a CUDA error.
std::vector<CapturedMemset> captured_memsets(cudaStream_t stream,
                                             const std::function<void()>& launch);

}  // namespace railyard::cuda
