#include "graph_memsets.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
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

// The hoisted memsets' zeroing: span blockIdx.y of `spans`, its bytes one a thread.
constexpr unsigned kMaxZeroSpans = 32;
struct ZeroSpans {
  char* begin[kMaxZeroSpans];
  size_t bytes[kMaxZeroSpans];
};

__global__ void hoisted_memset_kernel(ZeroSpans spans) {
  char* dst = spans.begin[blockIdx.y];
  const size_t n = spans.bytes[blockIdx.y];
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    dst[i] = 0;
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

// A hoisted_memset_kernel node zeroing the first `n` spans of `batch` (the widest `widest`
// bytes), before each of `roots`.
void add_zeroing(cudaGraph_t graph, const std::vector<cudaGraphNode_t>& roots,
                 const ZeroSpans& batch, unsigned n, size_t widest) {
  ZeroSpans spans = batch;
  void* args[] = {&spans};
  cudaKernelNodeParams k{};
  k.func = reinterpret_cast<void*>(&hoisted_memset_kernel);
  k.blockDim = dim3(256);
  k.gridDim = dim3(unsigned(std::min<size_t>((widest + 255) / 256, 1024)), n);
  k.kernelParams = args;
  cudaGraphNode_t kernel = nullptr;
  RY_CUDA(cudaGraphAddKernelNode(&kernel, graph, nullptr, 0, &k));
  for (cudaGraphNode_t r : roots) RY_CUDA(cudaGraphAddDependencies(graph, &kernel, &r, nullptr, 1));
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

// A memset node's bytes [begin, end), and the first range of the hoist that holds them.
struct Span {
  cudaGraphNode_t node;
  uintptr_t begin, end;
  size_t range;
};

// The first of `ranges` that holds [begin, end); ranges.size() where none does.
size_t range_of(uintptr_t begin, uintptr_t end, const std::vector<ScratchRange>& ranges) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto lo = reinterpret_cast<uintptr_t>(ranges[i].base);
    if (begin >= lo && end <= lo + ranges[i].bytes) return i;
  }
  return ranges.size();
}

// `node`'s bytes where it is a memset of zeros to consecutive bytes inside one of `ranges` with
// only plain edges; none otherwise.
std::optional<Span> zeroing_inside(cudaGraphNode_t node, const std::vector<ScratchRange>& ranges) {
  cudaMemsetParams m{};
  RY_CUDA(cudaGraphMemsetNodeGetParams(node, &m));
  const auto bytes = zeroed_bytes(m);
  if (!bytes) return std::nullopt;
  const size_t range = range_of(bytes->first, bytes->second, ranges);
  if (range == ranges.size()) return std::nullopt;
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> edges;
  edges_of(node, true, nodes, edges);
  if (!plain(edges)) return std::nullopt;
  edges_of(node, false, nodes, edges);
  if (!plain(edges)) return std::nullopt;
  return Span{node, bytes->first, bytes->second, range};
}

// The hoistable memsets of `graph` in `ranges`, by address, less those that overlap another.
std::vector<Span> hoistable(cudaGraph_t graph, const std::vector<ScratchRange>& ranges) {
  std::vector<Span> found;
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    if (!is_memset(node)) continue;
    if (const auto s = zeroing_inside(node, ranges)) found.push_back(*s);
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

// Whether every node `node` waits for, directly or not, is a memset node.
bool only_memsets_before(cudaGraphNode_t node) {
  std::vector<cudaGraphNode_t> todo{node}, deps;
  std::vector<cudaGraphEdgeData> edges;
  while (!todo.empty()) {
    const cudaGraphNode_t n = todo.back();
    todo.pop_back();
    edges_of(n, true, deps, edges);
    for (cudaGraphNode_t d : deps) {
      if (!is_memset(d)) return false;
      todo.push_back(d);
    }
  }
  return true;
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

std::optional<std::pair<uintptr_t, uintptr_t>> zeroed_bytes(const cudaMemsetParams& m) {
  const size_t row = m.width * m.elementSize, height = m.height == 0 ? 1 : m.height;
  const unsigned mask = m.elementSize >= 4 ? ~0u : (1u << (8 * m.elementSize)) - 1;
  if ((m.value & mask) != 0 || (height > 1 && m.pitch != row) || row == 0) return std::nullopt;
  const auto begin = reinterpret_cast<uintptr_t>(m.dst);
  return std::make_pair(begin, begin + row * height);
}

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

std::vector<size_t> hoist_scratch_memsets(cudaGraph_t graph,
                                          const std::vector<ScratchRange>& ranges) {
  std::vector<size_t> counts(ranges.size(), 0);
  const std::vector<Span> spans = hoistable(graph, ranges);
  if (spans.empty()) return counts;
  // Per range, from its first hoisted memset's bytes to its last one's.
  std::vector<std::pair<uintptr_t, uintptr_t>> zero(ranges.size(), {UINTPTR_MAX, 0});
  for (const Span& s : spans) {
    ++counts[s.range];
    zero[s.range].first = std::min(zero[s.range].first, s.begin);
    zero[s.range].second = std::max(zero[s.range].second, s.end);
    bypass(graph, s.node);
  }
  // Before every root, so before every node: no node can touch the spans while they are zeroed.
  const std::vector<cudaGraphNode_t> roots = listed(graph, &cudaGraphGetRootNodes);
  ZeroSpans batch{};
  unsigned n = 0;
  size_t widest = 0;
  for (size_t r = 0; r < ranges.size(); ++r) {
    if (counts[r] == 0) continue;
    batch.begin[n] = reinterpret_cast<char*>(zero[r].first);
    batch.bytes[n] = zero[r].second - zero[r].first;
    widest = std::max(widest, batch.bytes[n++]);
    if (n == kMaxZeroSpans) {
      add_zeroing(graph, roots, batch, n, widest);
      n = 0;
      widest = 0;
    }
  }
  if (n > 0) add_zeroing(graph, roots, batch, n, widest);
  return counts;
}

std::vector<CapturedMemset> captured_memsets(cudaStream_t stream,
                                             const std::function<void()>& launch) {
  cudaGraph_t graph = nullptr;
  RY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    launch();
  } catch (...) {
    // Ends the capture (its error, if the launches broke it, is expected here) before rethrowing.
    if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) {
      cudaGraphDestroy(graph);
    }
    (void)cudaGetLastError();
    throw;
  }
  RY_CUDA(cudaStreamEndCapture(stream, &graph));
  std::vector<CapturedMemset> out;
  try {
    for (cudaGraphNode_t node : graph_nodes(graph)) {
      if (!is_memset(node)) continue;
      out.emplace_back();
      RY_CUDA(cudaGraphMemsetNodeGetParams(node, &out.back().params));
      out.back().leading = only_memsets_before(node);
    }
  } catch (...) {
    cudaGraphDestroy(graph);
    throw;
  }
  RY_CUDA(cudaGraphDestroy(graph));
  return out;
}

}  // namespace railyard::cuda
