// cuDNN's attention calls at staggered workspaces (attention_stagger.hpp), as the engine runs
// them in a step: 12 forward calls, then 12 backward calls from the last layer down, each after
// a write of non-zero bytes into the buffer standing in for d4 (the MLP's gradient, which shares
// the region). At GPT-2 124M's shape (where cuDNN issues one small memset a call on an H200) and
// at a small one:
// - the stagger decision (both kinds staggered at GPT-2's shape: the step timeline's 24 cuDNN
//   memsets must be hoistable);
// - eager calls at the staggered workspaces give the bits of eager calls sharing one workspace;
// - the forward and backward captured as two graphs, their memsets hoisted as the step graphs
//   do (every zero memset in the region goes, one per call), then launched twice with the region
//   poisoned before each: the same bits again.
// Exit 77 without a GPU.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "attention_cudnn.hpp"
#include "attention_stagger.hpp"
#include "gpu_check.hpp"
#include "graph_memsets.hpp"

using namespace railyard;

namespace {

constexpr int kLayers = 12;
constexpr size_t kBudget = size_t(16) << 20;  // the engine's kAttentionStaggerBudget

using Bytes = std::vector<std::vector<uint8_t>>;

struct Layer {
  cuda::DeviceBuffer qkv, out, stats, dout, dqkv;
};

// Bf16 values of a cheap generator (xorshift), in about [-2, 2].
void fill(cuda::DeviceBuffer& b, uint64_t seed) {
  std::vector<uint16_t> h(b.bytes() / 2);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint16_t& v : h) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float f = float(int64_t(x >> 40) - (int64_t(1) << 23)) / float(1 << 22);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    v = uint16_t(bits >> 16);
  }
  RY_CUDA(cudaMemcpy(b.as<void>(), h.data(), h.size() * 2, cudaMemcpyHostToDevice));
}

std::vector<uint8_t> bytes_of(const cuda::DeviceBuffer& b) {
  std::vector<uint8_t> h(b.bytes());
  RY_CUDA(cudaMemcpy(h.data(), b.as<void>(), h.size(), cudaMemcpyDeviceToHost));
  return h;
}

struct Step {
  cuda::AttentionShape sh;
  cuda::CudnnAttention attn;
  std::vector<Layer> layers;
  cuda::DeviceBuffer region;
  size_t d4_bytes = 0;

  explicit Step(const cuda::AttentionShape& s) : sh(s) {
    const size_t n = size_t(s.B) * s.T, c = size_t(s.H) * s.hd;
    d4_bytes = 4 * n * c * 2;
    region = cuda::DeviceBuffer(std::max(attn.prepare(s), d4_bytes) + kBudget + 256);
    attn.set_workspace(region.as<void>(), region.bytes());
    for (int l = 0; l < kLayers; ++l) {
      Layer y{cuda::DeviceBuffer(n * 3 * c * 2), cuda::DeviceBuffer(n * c * 2),
              cuda::DeviceBuffer(cuda::CudnnAttention::stats_elems(s) * 4),
              cuda::DeviceBuffer(n * c * 2), cuda::DeviceBuffer(n * 3 * c * 2)};
      fill(y.qkv, 2 * l + 1);
      fill(y.dout, 2 * l + 2);
      layers.push_back(std::move(y));
    }
  }
  cuda::bf16* b(const cuda::DeviceBuffer& x) const { return x.as<cuda::bf16>(); }
  void forward(int j, size_t at, cudaStream_t s) {
    Layer& y = layers[size_t(j)];
    attn.forward(b(y.out), y.stats.as<float>(), b(y.qkv), sh, s, at);
  }
  // Backward call j: layer kLayers - 1 - j.
  void backward(int j, size_t at, cudaStream_t s) {
    Layer& y = layers[size_t(kLayers - 1 - j)];
    attn.backward(b(y.dqkv), b(y.dout), b(y.out), y.stats.as<float>(), b(y.qkv), sh, s, at);
  }
  // The backward calls, each after d4 (at `d4_at` in the region) is written.
  void backward_all(const cuda::WorkspaceStagger* st, size_t d4_at, cudaStream_t s) {
    for (int j = 0; j < kLayers; ++j) {
      RY_CUDA(cudaMemsetAsync(region.as<char>() + d4_at, 0x5A, d4_bytes, s));
      backward(j, st ? st->kinds[1].offset(j, kLayers) : 0, s);
    }
  }
  void forward_all(const cuda::WorkspaceStagger* st, cudaStream_t s) {
    for (int j = 0; j < kLayers; ++j) forward(j, st ? st->kinds[0].offset(j, kLayers) : 0, s);
  }
  // Every output and the region all bits set, as a stale step would leave them.
  void poison() {
    RY_CUDA(cudaMemset(region.as<void>(), 0xFF, region.bytes()));
    for (Layer& y : layers) {
      RY_CUDA(cudaMemset(y.out.as<void>(), 0xFF, y.out.bytes()));
      RY_CUDA(cudaMemset(y.stats.as<void>(), 0xFF, y.stats.bytes()));
      RY_CUDA(cudaMemset(y.dqkv.as<void>(), 0xFF, y.dqkv.bytes()));
    }
    RY_CUDA(cudaDeviceSynchronize());
  }
  Bytes outputs() const {
    RY_CUDA(cudaDeviceSynchronize());
    Bytes o;
    for (const Layer& y : layers) {
      o.push_back(bytes_of(y.out));
      o.push_back(bytes_of(y.stats));
      o.push_back(bytes_of(y.dqkv));
    }
    return o;
  }
};

void same(gpu_check::Report& r, const std::string& what, const Bytes& out, const Bytes& ref) {
  size_t diff = out.size() == ref.size() ? 0 : 1;
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i) diff += out[i] != ref[i];
  std::printf("%-4s %-56s %zu buffer(s) differ\n", diff == 0 ? "ok" : "FAIL", what.c_str(), diff);
  if (diff != 0) r.fail(what);
}

// Zero memsets of `g` in the region.
size_t zero_memsets_in(cudaGraph_t g, const cuda::DeviceBuffer& region) {
  const auto lo = reinterpret_cast<uintptr_t>(region.as<void>()), hi = lo + region.bytes();
  size_t k = 0;
  for (cudaGraphNode_t node : cuda::graph_nodes(g)) {
    cudaGraphNodeType t{};
    RY_CUDA(cudaGraphNodeGetType(node, &t));
    if (t != cudaGraphNodeTypeMemset) continue;
    cudaMemsetParams m{};
    RY_CUDA(cudaGraphMemsetNodeGetParams(node, &m));
    const auto z = cuda::zeroed_bytes(m);
    k += z && z->first >= lo && z->first < hi;
  }
  return k;
}

// `queue` captured on `s`, its memsets in `ranges` hoisted and the small ones made kernels, as
// the step graphs do; how many were hoisted and how many zero memsets stay in the region.
cudaGraphExec_t captured(Step& step, const std::vector<cuda::ScratchRange>& ranges, cudaStream_t s,
                         const std::function<void()>& queue, size_t& hoisted, size_t& left) {
  cudaGraph_t g = nullptr;
  RY_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  queue();
  RY_CUDA(cudaStreamEndCapture(s, &g));
  hoisted = 0;
  for (size_t n : cuda::hoist_scratch_memsets(g, ranges)) hoisted += n;
  left = zero_memsets_in(g, step.region);
  cuda::replace_small_memsets(g);
  cudaGraphExec_t exec = nullptr;
  RY_CUDA(cudaGraphInstantiate(&exec, g, 0));
  RY_CUDA(cudaGraphDestroy(g));
  return exec;
}

void check_shape(gpu_check::Report& r, const cuda::AttentionShape& sh, bool expect_staggered) {
  const std::string t = "B=" + std::to_string(sh.B) + " T=" + std::to_string(sh.T) + ": ";
  cudaStream_t s = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Step step(sh);
  step.poison();
  step.forward_all(nullptr, s);
  step.backward_all(nullptr, 0, s);
  const Bytes shared = step.outputs();  // one workspace, d4 at its start: the engine without

  std::vector<cuda::WorkspaceCalls> kinds(2);
  kinds[0] = {"fwd", kLayers, step.attn.workspace_bytes(sh, cuda::SdpaGraph::kForward), false,
              [&](int j, size_t at) { step.forward(j, at, s); }};
  kinds[1] = {"bwd", kLayers, step.attn.workspace_bytes(sh, cuda::SdpaGraph::kBackward), true,
              [&](int j, size_t at) { step.backward(j, at, s); }};
  const cuda::WorkspaceStagger st = cuda::stagger_workspaces(
      s, step.region.as<void>(), step.region.bytes(), step.d4_bytes, kBudget, kinds);
  RY_CUDA(cudaStreamSynchronize(s));
  std::printf("     %sworkspaces fwd %zu B, bwd %zu B; %s; d4 at %zu\n", t.c_str(),
              kinds[0].workspace, kinds[1].workspace, st.describe().c_str(), st.apart);
  size_t per_call[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    if (st.kinds[k].stagger.order != cuda::StaggerOrder::kKeep) {
      per_call[k] = st.kinds[k].memsets.size();
    } else if (expect_staggered) {
      r.fail(t + kinds[k].name + " not staggered: " + st.kinds[k].stagger.why);
    }
  }

  step.poison();
  step.forward_all(&st, s);
  step.backward_all(&st, st.apart, s);
  same(r, t + "eager, staggered = one workspace", step.outputs(), shared);

  size_t hoisted[2] = {0, 0}, left[2] = {0, 0};
  cudaGraphExec_t fwd = captured(
      step, st.hoist[0], s, [&] { step.forward_all(&st, s); }, hoisted[0], left[0]);
  cudaGraphExec_t bwd = captured(
      step, st.hoist[1], s, [&] { step.backward_all(&st, st.apart, s); }, hoisted[1], left[1]);
  for (int k = 0; k < 2; ++k) {
    const bool ok = hoisted[k] == kLayers * per_call[k] && (per_call[k] == 0 || left[k] == 0);
    std::printf("%-4s %s%s graph: %zu memset(s) hoisted (%d x %zu), %zu zero memset(s) left\n",
                ok ? "ok" : "FAIL", t.c_str(), kinds[k].name.c_str(), hoisted[k], kLayers,
                per_call[k], left[k]);
    if (!ok) r.fail(t + kinds[k].name + " graph: every staggered memset hoisted");
  }
  for (int launch = 1; launch <= 2; ++launch) {
    step.poison();
    RY_CUDA(cudaGraphLaunch(fwd, s));
    RY_CUDA(cudaGraphLaunch(bwd, s));
    RY_CUDA(cudaStreamSynchronize(s));
    same(r, t + "graphs, memsets hoisted, launch " + std::to_string(launch) + " = one workspace",
         step.outputs(), shared);
  }
  RY_CUDA(cudaGraphExecDestroy(fwd));
  RY_CUDA(cudaGraphExecDestroy(bwd));
  RY_CUDA(cudaStreamDestroy(s));
}

}  // namespace

int main() {
  gpu_check::skip_without_gpu();
  try {
    gpu_check::Report r;
    check_shape(r, cuda::AttentionShape{3, 96, 6, 32}, false);
    int device = 0, major = 0;
    RY_CUDA(cudaGetDevice(&device));
    RY_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    // GPT-2 124M's training shape; its memsets are known on Hopper (the step timeline).
    check_shape(r, cuda::AttentionShape{16, 1024, 12, 64}, major == 9);
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
