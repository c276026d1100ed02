#include "graph_memsets.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "cuda_check.hpp"

namespace railyard::cuda {

namespace {

// One thread per element of a (possibly pitched) memset: `value` is the memset's, of which an
// element of 1 or 2 bytes takes the low bytes, as cudaMemset2D does.
__global__ void memset_kernel(char* dst, size_t pitch, unsigned value, unsigned element_size,
                              size_t width, size_t height) {
  const size_t n = width * height;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    char* p = dst + (i / width) * pitch + (i % width) * element_size;
    if (element_size == 4) {
      *reinterpret_cast<unsigned*>(p) = value;
    } else if (element_size == 2) {
      *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(value);
    } else {
      *p = static_cast<char>(value);
    }
  }
}

bool plain(const std::vector<cudaGraphEdgeData>& edges) {
  for (const cudaGraphEdgeData& e : edges) {
    if (e.from_port != 0 || e.to_port != 0 || e.type != cudaGraphDependencyTypeDefault) {
      return false;
    }
  }
  return true;
}

// A node's dependencies (upstream = true) or dependents, with their edges' data.
void edges_of(cudaGraphNode_t node, bool upstream, std::vector<cudaGraphNode_t>& nodes,
              std::vector<cudaGraphEdgeData>& edges) {
  size_t n = 0;
  if (upstream) {
    RY_CUDA(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n));
  } else {
    RY_CUDA(cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &n));
  }
  nodes.assign(n, nullptr);
  edges.assign(n, cudaGraphEdgeData{});
  if (n == 0) return;
  if (upstream) {
    RY_CUDA(cudaGraphNodeGetDependencies(node, nodes.data(), edges.data(), &n));
  } else {
    RY_CUDA(cudaGraphNodeGetDependentNodes(node, nodes.data(), edges.data(), &n));
  }
}

// A memset_kernel node writing `m` (height at least 1), after `deps`.
cudaGraphNode_t add_memset_kernel(cudaGraph_t graph, const std::vector<cudaGraphNode_t>& deps,
                                  const cudaMemsetParams& m) {
  char* dst = static_cast<char*>(m.dst);
  size_t pitch = m.pitch, width = m.width, height = m.height;
  unsigned value = m.value, element_size = m.elementSize;
  void* args[] = {&dst, &pitch, &value, &element_size, &width, &height};
  cudaKernelNodeParams k{};
  k.func = reinterpret_cast<void*>(&memset_kernel);
  const size_t n = width * height;
  k.blockDim = dim3(256);
  k.gridDim = dim3(unsigned((n + 255) / 256));
  k.kernelParams = args;
  cudaGraphNode_t kernel = nullptr;
  RY_CUDA(cudaGraphAddKernelNode(&kernel, graph, deps.data(), deps.size(), &k));
  return kernel;
}

// Replaces one memset node; false where it is left alone (too large, or edges other than plain).
bool replace(cudaGraph_t graph, cudaGraphNode_t node) {
  cudaMemsetParams m{};
  RY_CUDA(cudaGraphMemsetNodeGetParams(node, &m));
  if (m.height == 0) m.height = 1;
  if (m.width * m.height * m.elementSize > kMaxReplacedBytes) return false;
  std::vector<cudaGraphNode_t> deps, dependents;
  std::vector<cudaGraphEdgeData> dep_edges, dependent_edges;
  edges_of(node, true, deps, dep_edges);
  edges_of(node, false, dependents, dependent_edges);
  if (!plain(dep_edges) || !plain(dependent_edges)) return false;
  cudaGraphNode_t kernel = add_memset_kernel(graph, deps, m);
  for (cudaGraphNode_t d : dependents) {
    RY_CUDA(cudaGraphAddDependencies(graph, &kernel, &d, nullptr, 1));
  }
  RY_CUDA(cudaGraphDestroyNode(node));  // and its edges
  return true;
}

bool is_memset(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  RY_CUDA(cudaGraphNodeGetType(node, &type));
  return type == cudaGraphNodeTypeMemset;
}

// A memset node's bytes [begin, end).
struct Span {
  cudaGraphNode_t node;
  uintptr_t begin, end;
};

// `node`'s bytes where it is a memset of zeros to consecutive bytes inside [lo, hi) with only
// plain edges; none otherwise.
std::optional<Span> zeroing_inside(cudaGraphNode_t node, uintptr_t lo, uintptr_t hi) {
  cudaMemsetParams m{};
  RY_CUDA(cudaGraphMemsetNodeGetParams(node, &m));
  const size_t row = m.width * m.elementSize, height = m.height == 0 ? 1 : m.height;
  const unsigned mask = m.elementSize >= 4 ? ~0u : (1u << (8 * m.elementSize)) - 1;
  if ((m.value & mask) != 0 || (height > 1 && m.pitch != row) || row == 0) return std::nullopt;
  const auto begin = reinterpret_cast<uintptr_t>(m.dst);
  if (begin < lo || begin > hi || row * height > hi - begin) return std::nullopt;
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> edges;
  edges_of(node, true, nodes, edges);
  if (!plain(edges)) return std::nullopt;
  edges_of(node, false, nodes, edges);
  if (!plain(edges)) return std::nullopt;
  return Span{node, begin, begin + row * height};
}

// The hoistable memsets of `graph` in [lo, hi), by address, less those that overlap another.
std::vector<Span> hoistable(cudaGraph_t graph, uintptr_t lo, uintptr_t hi) {
  std::vector<Span> found;
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    if (!is_memset(node)) continue;
    if (const auto s = zeroing_inside(node, lo, hi)) found.push_back(*s);
  }
  std::sort(found.begin(), found.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  std::vector<Span> kept;
  uintptr_t reach = 0;  // the furthest end of the memsets before the current one
  for (size_t i = 0; i < found.size(); ++i) {
    const bool after_earlier = found[i].begin >= reach;
    const bool before_next = i + 1 == found.size() || found[i + 1].begin >= found[i].end;
    if (after_earlier && before_next) kept.push_back(found[i]);
    reach = std::max(reach, found[i].end);
  }
  return kept;
}

// Removes `node`, making each of its dependents depend on each of its dependencies instead.
void bypass(cudaGraph_t graph, cudaGraphNode_t node) {
  std::vector<cudaGraphNode_t> deps, dependents, has;
  std::vector<cudaGraphEdgeData> edges;
  edges_of(node, true, deps, edges);
  edges_of(node, false, dependents, edges);
  RY_CUDA(cudaGraphDestroyNode(node));  // and its edges
  for (cudaGraphNode_t d : dependents) {
    edges_of(d, true, has, edges);
    for (cudaGraphNode_t p : deps) {
      // Adding an edge that exists is an error; a dependent may already wait for p.
      if (std::find(has.begin(), has.end(), p) == has.end()) {
        RY_CUDA(cudaGraphAddDependencies(graph, &p, &d, nullptr, 1));
      }
    }
  }
}

// The nodes a cudaGraphGet*Nodes call lists (sized first).
std::vector<cudaGraphNode_t> listed(cudaGraph_t graph,
                                    cudaError_t (*get)(cudaGraph_t, cudaGraphNode_t*, size_t*)) {
  size_t count = 0;
  RY_CUDA(get(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) RY_CUDA(get(graph, nodes.data(), &count));
  return nodes;
}

}  // namespace

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph) {
  return listed(graph, &cudaGraphGetNodes);
}

size_t replace_small_memsets(cudaGraph_t graph) {
  size_t replaced = 0;
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    if (is_memset(node) && replace(graph, node)) ++replaced;
  }
  return replaced;
}

size_t hoist_scratch_memsets(cudaGraph_t graph, const void* base, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(base);
  const std::vector<Span> spans = hoistable(graph, lo, lo + bytes);
  if (spans.empty()) return 0;
  uintptr_t end = 0;
  for (const Span& s : spans) {
    end = std::max(end, s.end);
    bypass(graph, s.node);
  }
  // Before every root, so before every node: no node can touch the span while it is zeroed.
  const std::vector<cudaGraphNode_t> roots = listed(graph, &cudaGraphGetRootNodes);
  cudaMemsetParams zero{};
  zero.dst = reinterpret_cast<void*>(spans.front().begin);
  zero.elementSize = 1;
  zero.width = end - spans.front().begin;
  zero.height = 1;
  cudaGraphNode_t kernel = add_memset_kernel(graph, {}, zero);
  for (cudaGraphNode_t r : roots) RY_CUDA(cudaGraphAddDependencies(graph, &kernel, &r, nullptr, 1));
  return spans.size();
}

}  // namespace railyard::cuda
