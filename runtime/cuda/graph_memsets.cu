#include "graph_memsets.hpp"

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

// Replaces one memset node; false where it is left alone (too large, or edges other than plain).
bool replace(cudaGraph_t graph, cudaGraphNode_t node) {
  cudaMemsetParams m{};
  RY_CUDA(cudaGraphMemsetNodeGetParams(node, &m));
  size_t height = m.height == 0 ? 1 : m.height;
  if (m.width * height * m.elementSize > kMaxReplacedBytes) return false;
  std::vector<cudaGraphNode_t> deps, dependents;
  std::vector<cudaGraphEdgeData> dep_edges, dependent_edges;
  edges_of(node, true, deps, dep_edges);
  edges_of(node, false, dependents, dependent_edges);
  if (!plain(dep_edges) || !plain(dependent_edges)) return false;

  char* dst = static_cast<char*>(m.dst);
  size_t pitch = m.pitch, width = m.width;
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
  for (cudaGraphNode_t d : dependents) {
    RY_CUDA(cudaGraphAddDependencies(graph, &kernel, &d, nullptr, 1));
  }
  RY_CUDA(cudaGraphDestroyNode(node));  // and its edges
  return true;
}

}  // namespace

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph) {
  size_t count = 0;
  RY_CUDA(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) RY_CUDA(cudaGraphGetNodes(graph, nodes.data(), &count));
  return nodes;
}

size_t replace_small_memsets(cudaGraph_t graph) {
  size_t replaced = 0;
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    cudaGraphNodeType type{};
    RY_CUDA(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeMemset && replace(graph, node)) ++replaced;
  }
  return replaced;
}

}  // namespace railyard::cuda
