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

}  // namespace railyard::cuda
