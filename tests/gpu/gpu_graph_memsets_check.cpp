// Small memset nodes of a graph rewritten as kernels (graph_memsets.hpp): a chain of memsets of
// 4-, 2- and 1-byte elements, pitched and flat, where a later one overwrites part of an earlier
// one (so their order shows), and one above the size limit that must stay a memset node. The
// bytes after a launch must equal the same memsets applied in order on the host.
// Then hoisting memsets of zeros out of two scratch ranges (hoist_scratch_memsets): which memsets
// go and which stay (outside or across a range's end, not zeros, overlapping, pitched), the bytes
// after a launch; and a graph of cuBLASLt products captured with Matmul's workspace slots, whose
// tile-counter memsets must all go and whose outputs must be the eager launches' bits, launch
// after launch.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_check.hpp"
#include "graph_memsets.hpp"
#include "matmul_cublaslt.hpp"

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

cudaMemsetParams params_of(const Set& s, uint8_t* buf) {
  cudaMemsetParams m{};
  m.dst = buf + s.offset;
  m.pitch = s.pitch;
  m.value = s.value;
  m.elementSize = s.element_size;
  m.width = s.width;
  m.height = s.height;
  return m;
}

// A chain of memset nodes in a new graph, `sets` into `buf`, mirrored on `host` where given.
cudaGraph_t memset_chain(const std::vector<Set>& sets, uint8_t* buf, std::vector<uint8_t>* host) {
  cudaGraph_t g = nullptr;
  RY_CUDA(cudaGraphCreate(&g, 0));
  cudaGraphNode_t prev = nullptr;
  for (const Set& s : sets) {
    const cudaMemsetParams m = params_of(s, buf);
    cudaGraphNode_t node = nullptr;
    RY_CUDA(cudaGraphAddMemsetNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, &m));
    if (host != nullptr) apply(*host, m, s.offset);
    prev = node;
  }
  return g;
}

// Instantiates and launches `g` once, then returns `bytes` of `buf`.
std::vector<uint8_t> launched(cudaGraph_t g, const uint8_t* buf, size_t bytes) {
  cudaGraphExec_t exec = nullptr;
  RY_CUDA(cudaGraphInstantiate(&exec, g, 0));
  RY_CUDA(cudaGraphLaunch(exec, nullptr));
  RY_CUDA(cudaDeviceSynchronize());
  RY_CUDA(cudaGraphExecDestroy(exec));
  std::vector<uint8_t> out(bytes);
  RY_CUDA(cudaMemcpy(out.data(), buf, bytes, cudaMemcpyDeviceToHost));
  return out;
}

void same_bytes(gpu_check::Report& r, const char* what, const std::vector<uint8_t>& out,
                const std::vector<uint8_t>& ref) {
  size_t diff = 0;
  for (size_t i = 0; i < out.size(); ++i) diff += out[i] != ref[i];
  std::printf("%-4s %-44s %zu byte(s) differ\n", diff == 0 ? "ok" : "FAIL", what, diff);
  if (diff != 0) r.fail(std::string(what) + ": bytes differ from the host's");
}

void check_as_kernels(gpu_check::Report& r) {
  cuda::DeviceBuffer buf(kBytes);
  std::vector<uint8_t> ref(kBytes, 0xFF);
  RY_CUDA(cudaMemset(buf.as<uint8_t>(), 0xFF, kBytes));
  const std::vector<Set> sets = {
      {0, 256, 16, 8, 0x11223344u, 4},         // 8 rows of 64 bytes, pitch 256
      {32, 256, 8, 4, 0xABCDu, 2},             // over part of the one before
      {4096, 100, 100, 1, 0x5Au, 1},           // flat bytes (pitch unused with height 1)
      {8192, 0, (2u << 20) + 3, 1, 0x07u, 1},  // above the limit: stays a memset
      {8192 + 10, 0, 5, 1, 0xEEu, 1},          // over part of the large one
  };
  cudaGraph_t g = memset_chain(sets, buf.as<uint8_t>(), &ref);
  const size_t replaced = cuda::replace_small_memsets(g);
  const size_t kept = count_nodes(g, cudaGraphNodeTypeMemset);
  const size_t kernels = count_nodes(g, cudaGraphNodeTypeKernel);
  std::printf("%zu memset node(s) replaced, %zu kept, %zu kernel node(s)\n", replaced, kept,
              kernels);
  if (replaced != 4 || kept != 1 || kernels != 4) r.fail("4 small memsets replaced, 1 kept");
  same_bytes(r, "memsets as kernels, in order", launched(g, buf.as<uint8_t>(), kBytes), ref);
  RY_CUDA(cudaGraphDestroy(g));
}

// Scratch ranges [0, kScratch) and [kSecond, kSecond + 1024) of the buffer; the memsets of zeros
// wholly inside one, disjoint from the others and flat, go; the rest stay, in order, after the
// zeroing at the graph's head (one kernel, a span per range).
void check_hoisting(gpu_check::Report& r) {
  constexpr size_t kScratch = 64u << 10, kSecond = kScratch + 8192;
  cuda::DeviceBuffer buf(2 * kScratch);
  const std::vector<Set> hoisted = {
      {0, 0, 4, 1, 0u, 4},               // the first node: its dependent becomes a root
      {256, 0, 131, 1, 0u, 1},           //
      {512, 0, 2, 1, 0xFFFF0000u, 2},    // zeros in the element's low bytes
      {4096, 256, 256, 2, 0u, 1},        // two rows, pitch = row: consecutive bytes
      {kSecond + 100, 0, 50, 1, 0u, 1},  // the second range
      {kSecond + 600, 0, 16, 1, 0u, 1},  //
  };
  const std::vector<Set> kept = {
      {768, 0, 16, 1, 0x5Au, 1},         // not zeros
      {1024, 0, 8, 1, 0u, 1},            // overlaps the next
      {1028, 0, 8, 1, 0u, 1},            //
      {2048, 256, 8, 2, 0u, 1},          // pitched, with a gap
      {kScratch - 2, 0, 4, 1, 0u, 1},    // across the scratch's end
      {kScratch + 100, 0, 4, 1, 0u, 1},  // outside both
      {kSecond + 1020, 0, 8, 1, 0u, 1},  // across the second range's end
  };
  std::vector<Set> chain;  // interleaved, so removed nodes sit between kept ones
  for (size_t i = 0; i < kept.size(); ++i) {
    if (i < hoisted.size()) chain.push_back(hoisted[i]);
    chain.push_back(kept[i]);
  }
  std::vector<uint8_t> ref(2 * kScratch, 0xFF);
  // The span of each range's hoisted memsets, first.
  std::fill(ref.begin(), ref.begin() + 4096 + 512, 0);
  std::fill(ref.begin() + kSecond + 100, ref.begin() + kSecond + 616, 0);
  for (const Set& s : kept) apply(ref, params_of(s, buf.as<uint8_t>()), s.offset);
  cudaGraph_t g = memset_chain(chain, buf.as<uint8_t>(), nullptr);
  RY_CUDA(cudaMemset(buf.as<uint8_t>(), 0xFF, 2 * kScratch));
  const std::vector<size_t> n = cuda::hoist_scratch_memsets(
      g, {{buf.as<uint8_t>(), kScratch}, {buf.as<uint8_t>() + kSecond, 1024}});
  const size_t left = count_nodes(g, cudaGraphNodeTypeMemset);
  size_t roots = 0;
  RY_CUDA(cudaGraphGetRootNodes(g, nullptr, &roots));
  std::printf("%zu + %zu memset node(s) hoisted, %zu kept, %zu root(s)\n", n[0], n[1], left, roots);
  if (n.size() != 2 || n[0] != 4 || n[1] != 2 || left != kept.size() || roots != 1) {
    r.fail("hoisting: 4 + 2 memsets hoisted, 7 kept, the zeroing the one root");
  }
  same_bytes(r, "memsets hoisted, the rest in order", launched(g, buf.as<uint8_t>(), 2 * kScratch),
             ref);
  RY_CUDA(cudaGraphDestroy(g));
}

using Bf16 = __nv_bfloat16;

// Row-major products of the step's kinds chained through their outputs: bias forwards,
// a backward-input, a backward-weight (split-K where the pin or heuristic says so: shared
// workspace, its memset kept).
struct Products {
  static constexpr int N = 16384, C = 768;  // the step's attn-proj products (pinned, nvjet)
  gpu_check::DevArray<Bf16> x{size_t(N) * C}, w{size_t(C) * C}, b{C};
  gpu_check::DevArray<Bf16> y1{size_t(N) * C}, y2{size_t(N) * C}, dx{size_t(N) * C};
  gpu_check::DevArray<float> dw{size_t(C) * C};
  Products() {
    std::mt19937_64 rng(12);
    x.upload(gpu_check::random_vec(rng, x.n));
    w.upload(gpu_check::random_vec(rng, w.n, 0.03f));
    b.upload(gpu_check::random_vec(rng, b.n));
  }
  void launch(cuda::Matmul& mm, cudaStream_t s) const {
    mm.linear_forward(y1.ptr(), x.ptr(), w.ptr(), b.ptr(), N, C, C, CUDA_R_16BF, s);
    mm.linear_forward(y2.ptr(), y1.ptr(), w.ptr(), b.ptr(), N, C, C, CUDA_R_16BF, s);
    mm.linear_backward_input(dx.ptr(), y2.ptr(), w.ptr(), N, C, C, CUDA_R_16BF, false, s);
    mm.linear_forward(y1.ptr(), dx.ptr(), w.ptr(), b.ptr(), N, C, C, CUDA_R_16BF, s);
    mm.linear_backward_weight(dw.ptr(), y1.ptr(), x.ptr(), N, C, C, CUDA_R_16BF, false, s);
  }
  void poison() {
    y1.poison();
    y2.poison();
    dx.poison();
    dw.poison();
    RY_CUDA(cudaDeviceSynchronize());  // before launches on another stream
  }
  std::vector<std::vector<double>> outputs() const {
    return {y1.download(), y2.download(), dx.download(), dw.download()};
  }
};

size_t memsets_in(cudaGraph_t g, const void* base, size_t bytes) {
  size_t k = 0;
  for (cudaGraphNode_t node : cuda::graph_nodes(g)) {
    cudaGraphNodeType t{};
    RY_CUDA(cudaGraphNodeGetType(node, &t));
    if (t != cudaGraphNodeTypeMemset) continue;
    cudaMemsetParams m{};
    RY_CUDA(cudaGraphMemsetNodeGetParams(node, &m));
    const auto* p = static_cast<const uint8_t*>(m.dst);
    k += p >= static_cast<const uint8_t*>(base) && p < static_cast<const uint8_t*>(base) + bytes;
  }
  return k;
}

// The products captured with workspace slots, hoisted and rewritten as the step's graphs are,
// against the same products launched eagerly (the shared workspace, memsets in place).
void check_products(gpu_check::Report& r) {
  cuda::Matmul mm;
  Products p;
  cudaStream_t s = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  p.poison();
  p.launch(mm, s);  // also the warm-up: plans are made outside the capture
  const auto eager = p.outputs();
  cudaGraph_t g = nullptr;
  RY_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  p.launch(mm, s);
  RY_CUDA(cudaStreamEndCapture(s, &g));
  const size_t all = count_nodes(g, cudaGraphNodeTypeMemset);
  const size_t in_slots = memsets_in(g, mm.slot_arena(), mm.slot_arena_bytes());
  const size_t hoisted =
      cuda::hoist_scratch_memsets(g, {{mm.slot_arena(), mm.slot_arena_bytes()}}).at(0);
  cuda::replace_small_memsets(g);
  std::printf("products: %zu memset node(s), %zu in workspace slots, %zu hoisted, %zu elsewhere\n",
              all, in_slots, hoisted, all - in_slots);
  if (hoisted != in_slots || (cuda::kWorkspaceSlots && hoisted == 0)) {
    r.fail("products: every memset in the slots hoisted (none there: nothing to gain)");
  }
  cudaGraphExec_t exec = nullptr;
  RY_CUDA(cudaGraphInstantiate(&exec, g, 0));
  const char* names[] = {"forward", "forward of forward", "backward-input", "backward-weight"};
  for (int launch = 1; launch <= 2; ++launch) {  // the second finds the counters as left
    p.poison();
    RY_CUDA(cudaGraphLaunch(exec, s));
    RY_CUDA(cudaStreamSynchronize(s));
    const auto out = p.outputs();
    for (size_t i = 0; i < out.size(); ++i) {
      r.same_bits("graph launch " + std::to_string(launch) + " = eager: " + names[i], out[i],
                  eager[i]);
    }
  }
  RY_CUDA(cudaGraphExecDestroy(exec));
  RY_CUDA(cudaGraphDestroy(g));
  RY_CUDA(cudaStreamDestroy(s));
}

}  // namespace

int main() {
  gpu_check::skip_without_gpu();
  try {
    gpu_check::Report r;
    check_as_kernels(r);
    check_hoisting(r);
    check_products(r);
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
