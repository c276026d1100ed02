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
// hoist_scratch_memsets goes further for memsets into a scratch range the caller names (Matmul's
// workspace slots, matmul_cublaslt.hpp): there a memset of zeros is not needed where it stands.
// It rewrites `graph`: every memset node of zeros that lies wholly inside [base, base + bytes),
// writes consecutive bytes, overlaps no other such memset and has only plain edges goes, its
// dependencies now leading straight to its dependents; one kernel node, before every other node
// of the graph, zeroes the span from the first removed memset's bytes to the last one's. The
// caller promises, for every launch of the graph: nothing reads what the range held before the
// launch, nothing outside the graph touches it while the graph runs, and the bytes of each such
// memset are touched by no other node of the graph before the memset. Then every node finds
// the same bytes as before the rewrite, so the results are the same bits, and the step saves
// one memset per product (1.1 us each on the critical path as a kernel) for one zeroing kernel.

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace railyard::cuda {

inline constexpr size_t kMaxReplacedBytes = size_t(1) << 20;

// The nodes of `graph` (cudaGraphGetNodes, sized first). Throws std::runtime_error on a CUDA error.
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph);

// How many memset nodes became kernels. Throws std::runtime_error (naming the CUDA call) if
// the graph cannot be read or rewritten; the caller then runs without graphs.
size_t replace_small_memsets(cudaGraph_t graph);

// How many memset nodes went (none: the graph is unchanged). Run it before
// replace_small_memsets, whose kernel nodes it does not look at. Throws as that does.
size_t hoist_scratch_memsets(cudaGraph_t graph, const void* base, size_t bytes);

}  // namespace railyard::cuda
