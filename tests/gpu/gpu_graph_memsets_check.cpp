// Small memset nodes of a graph rewritten as kernels (graph_memsets.hpp): a chain of memsets of
// 4-, 2- and 1-byte elements, pitched and flat, where a later one overwrites part of an earlier
// one (so their order shows), and one above the size limit that must stay a memset node. The
// bytes after a launch must equal the same memsets applied in order on the host.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu_check.hpp"
#include "graph_memsets.hpp"

using namespace railyard;

namespace {

constexpr size_t kBytes = 3u << 20;

// The memset `m` (offset from the buffer's start) applied to the host mirror.
void apply(std::vector<uint8_t>& host, const cudaMemsetParams& m, size_t offset) {
  for (size_t r = 0; r < m.height; ++r) {
    for (size_t c = 0; c < m.width; ++c) {
      uint8_t* p = host.data() + offset + r * m.pitch + c * m.elementSize;
      std::memcpy(p, &m.value, m.elementSize);  // little-endian: the value's low bytes
    }
  }
}

size_t count_nodes(cudaGraph_t g, cudaGraphNodeType type) {
  size_t k = 0;
  for (cudaGraphNode_t node : cuda::graph_nodes(g)) {
    cudaGraphNodeType t{};
    RY_CUDA(cudaGraphNodeGetType(node, &t));
    k += t == type;
  }
  return k;
}

struct Set {
  size_t offset, pitch, width, height;
  unsigned value, element_size;
};

}  // namespace

int main() {
  gpu_check::skip_without_gpu();
  try {
    cuda::DeviceBuffer buf(kBytes);
    std::vector<uint8_t> ref(kBytes, 0xFF);
    RY_CUDA(cudaMemset(buf.as<uint8_t>(), 0xFF, kBytes));
    const Set sets[] = {
        {0, 256, 16, 8, 0x11223344u, 4},         // 8 rows of 64 bytes, pitch 256
        {32, 256, 8, 4, 0xABCDu, 2},             // over part of the one before
        {4096, 100, 100, 1, 0x5Au, 1},           // flat bytes (pitch unused with height 1)
        {8192, 0, (2u << 20) + 3, 1, 0x07u, 1},  // above the limit: stays a memset
        {8192 + 10, 0, 5, 1, 0xEEu, 1},          // over part of the large one
    };
    cudaGraph_t g = nullptr;
    RY_CUDA(cudaGraphCreate(&g, 0));
    cudaGraphNode_t prev = nullptr;
    for (const Set& s : sets) {
      cudaMemsetParams m{};
      m.dst = buf.as<uint8_t>() + s.offset;
      m.pitch = s.pitch;
      m.value = s.value;
      m.elementSize = s.element_size;
      m.width = s.width;
      m.height = s.height;
      cudaGraphNode_t node = nullptr;
      RY_CUDA(cudaGraphAddMemsetNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &m));
      apply(ref, m, s.offset);
      prev = node;
    }
    gpu_check::Report r;
    const size_t replaced = cuda::replace_small_memsets(g);
    const size_t kept = count_nodes(g, cudaGraphNodeTypeMemset);
    const size_t kernels = count_nodes(g, cudaGraphNodeTypeKernel);
    std::printf("%zu memset node(s) replaced, %zu kept, %zu kernel node(s)\n", replaced, kept,
                kernels);
    if (replaced != 4 || kept != 1 || kernels != 4) r.fail("4 small memsets replaced, 1 kept");
    cudaGraphExec_t exec = nullptr;
    RY_CUDA(cudaGraphInstantiate(&exec, g, 0));
    RY_CUDA(cudaGraphLaunch(exec, nullptr));
    RY_CUDA(cudaDeviceSynchronize());
    std::vector<uint8_t> out(kBytes);
    RY_CUDA(cudaMemcpy(out.data(), buf.as<uint8_t>(), kBytes, cudaMemcpyDeviceToHost));
    size_t diff = 0;
    for (size_t i = 0; i < kBytes; ++i) diff += out[i] != ref[i];
    std::printf("%-4s %-44s %zu byte(s) differ\n", diff == 0 ? "ok" : "FAIL",
                "memsets as kernels, in order", diff);
    if (diff != 0) r.fail("memsets as kernels: bytes differ from the host's");
    RY_CUDA(cudaGraphExecDestroy(exec));
    RY_CUDA(cudaGraphDestroy(g));
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
