#include "attention_cudnn.hpp"

#include <stdexcept>
#include <string>
#include <unordered_map>

#include "attention_cudnn_graph.hpp"
#include "cuda_check.hpp"

namespace railyard::cuda {

namespace fe = cudnn_frontend;
using namespace sdpa;  // the graphs' tensor ids and check_fe

namespace {

void check_cudnn(cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuDNN: ") + what + " failed: " + cudnnGetErrorString(st) +
                             "; check that libcudnn 9 matches the driver (docs/gpu.md)");
  }
}

cudnnHandle_t as_handle(void* h) {
  return static_cast<cudnnHandle_t>(h);
}

// Index of the plan named `name` in the graph's list, or -1.
int64_t index_of(const fe::graph::Graph& g, const std::string& name) {
  for (int64_t i = 0; i < g.get_execution_plan_count(); ++i) {
    std::string n;
    if (g.get_plan_name_at_index(i, n).is_good() && n == name) return i;
  }
  return -1;
}

// Plans from heuristic mode A; builds the pinned one where it is in the list and builds, else the
// heuristic's first plan that builds (build_plans' default). Either is a fixed choice for a given
// cuDNN, GPU and shape, so runs agree bit for bit.
SdpaPlanChoice build_plan(fe::graph::Graph& g, cudnnHandle_t h, const std::string& pinned,
                          const char* what) {
  check_fe(g.create_execution_plans({fe::HeurMode_t::A}), what);
  check_fe(g.check_support(h), what);
  const int64_t at = pinned.empty() ? -1 : index_of(g, pinned);
  if (at < 0 || g.build_plan_at_index(at).is_bad()) check_fe(g.build_plans(h), what);
  SdpaPlanChoice c{"", pinned};
  check_fe(g.get_plan_name(c.built), what);
  return c;
}

size_t workspace_of(const fe::graph::Graph& g) {
  int64_t bytes = 0;
  check_fe(g.get_workspace_size(bytes), "workspace size");
  return bytes > 0 ? size_t(bytes) : 0;
}

}  // namespace

std::string SdpaPlanChoice::describe() const {
  if (pinned.empty()) return built;
  if (built == pinned) return built + " pinned";
  return built + " (pinned " + pinned + " not built)";
}

struct CudnnAttention::Graphs {
  std::shared_ptr<fe::graph::Graph> fwd, bwd;
  SdpaPlanChoice fwd_plan, bwd_plan;
  size_t fwd_workspace = 0, bwd_workspace = 0;
};

CudnnAttention::CudnnAttention() {
  int device = 0, major = 0, minor = 0;
  RY_CUDA(cudaGetDevice(&device));
  RY_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RY_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  sm_ = major * 10 + minor;
  cudnnHandle_t h = nullptr;
  check_cudnn(cudnnCreate(&h), "cudnnCreate");
  handle_ = h;
}

CudnnAttention::~CudnnAttention() {
  graphs_.clear();
  if (handle_ != nullptr) cudnnDestroy(as_handle(handle_));
}

CudnnAttention::Graphs& CudnnAttention::graphs_for(const AttentionShape& s) {
  if (heads_ == 0) heads_ = s.H, head_dim_ = s.hd;
  if (s.H != heads_ || s.hd != head_dim_) {
    throw std::logic_error("CudnnAttention: built for one head layout, called with another");
  }
  auto key = std::make_pair(s.B, s.T);
  auto it = graphs_.find(key);
  if (it != graphs_.end()) return *it->second;
  auto g = std::make_unique<Graphs>();
  cudnnHandle_t h = as_handle(handle_);
  g->fwd = forward_graph(h, s);
  g->fwd_plan =
      build_plan(*g->fwd, h, pinned_sdpa_plan(plan_key(s, SdpaGraph::kForward)), "forward graph");
  g->bwd = backward_graph(h, s, true);
  g->bwd_plan =
      build_plan(*g->bwd, h, pinned_sdpa_plan(plan_key(s, SdpaGraph::kBackward)), "backward graph");
  g->fwd_workspace = workspace_of(*g->fwd);
  g->bwd_workspace = workspace_of(*g->bwd);
  return *graphs_.emplace(key, std::move(g)).first->second;
}

size_t CudnnAttention::prepare(const AttentionShape& s) {
  const Graphs& g = graphs_for(s);
  return std::max(g.fwd_workspace, g.bwd_workspace);
}

size_t CudnnAttention::workspace_bytes(const AttentionShape& s, SdpaGraph graph) {
  const Graphs& g = graphs_for(s);
  return graph == SdpaGraph::kForward ? g.fwd_workspace : g.bwd_workspace;
}

SdpaPlanKey CudnnAttention::plan_key(const AttentionShape& s, SdpaGraph graph) const {
  return SdpaPlanKey{sm_, int(cudnnGetVersion()), s, graph};
}

const SdpaPlanChoice& CudnnAttention::plan(const AttentionShape& s, SdpaGraph graph) {
  Graphs& g = graphs_for(s);
  return graph == SdpaGraph::kForward ? g.fwd_plan : g.bwd_plan;
}

std::string CudnnAttention::describe(const AttentionShape& s) {
  return "fwd " + plan(s, SdpaGraph::kForward).describe() + ", bwd " +
         plan(s, SdpaGraph::kBackward).describe();
}

void CudnnAttention::set_workspace(void* ptr, size_t bytes) {
  workspace_ = ptr;
  workspace_bytes_ = bytes;
}

void* CudnnAttention::workspace_for(const Graphs& g, size_t bytes, size_t offset) {
  if (offset != 0) {
    if (offset > workspace_bytes_ || bytes > workspace_bytes_ - offset) {
      throw std::logic_error("CudnnAttention: a staggered workspace at " + std::to_string(offset) +
                             " does not fit in the planned " + std::to_string(workspace_bytes_) +
                             " bytes");
    }
    return static_cast<char*>(workspace_) + offset;
  }
  // Either graph of a shape uses the planned workspace where the larger fits, as the plan sized
  // it; a shape other than the planned one (an evaluation batch, say) that needs more gets its
  // own buffer.
  const size_t larger = std::max(g.fwd_workspace, g.bwd_workspace);
  if (larger <= workspace_bytes_) return workspace_;
  if (larger > overflow_.bytes()) overflow_ = DeviceBuffer(larger);
  return overflow_.as<void>();
}

void CudnnAttention::forward(bf16* out, float* stats, const bf16* qkv, const AttentionShape& s,
                             cudaStream_t stream, size_t workspace_offset) {
  Graphs& g = graphs_for(s);
  const size_t hd = size_t(s.H) * s.hd;
  bf16* base = const_cast<bf16*>(qkv);  // the variant pack takes non-const pointers
  std::unordered_map<int64_t, void*> pack{
      {kQ, base}, {kK, base + hd}, {kV, base + 2 * hd}, {kO, out}, {kStats, stats}};
  check_cudnn(cudnnSetStream(as_handle(handle_), stream), "cudnnSetStream");
  check_fe(
      g.fwd->execute(as_handle(handle_), pack, workspace_for(g, g.fwd_workspace, workspace_offset)),
      "forward");
}

void CudnnAttention::backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* stats,
                              const bf16* qkv, const AttentionShape& s, cudaStream_t stream,
                              size_t workspace_offset) {
  Graphs& g = graphs_for(s);
  const size_t hd = size_t(s.H) * s.hd;
  bf16* base = const_cast<bf16*>(qkv);
  std::unordered_map<int64_t, void*> pack{{kQ, base},
                                          {kK, base + hd},
                                          {kV, base + 2 * hd},
                                          {kO, const_cast<bf16*>(out)},
                                          {kDO, const_cast<bf16*>(dout)},
                                          {kStats, const_cast<float*>(stats)},
                                          {kDQ, dqkv},
                                          {kDK, dqkv + hd},
                                          {kDV, dqkv + 2 * hd}};
  check_cudnn(cudnnSetStream(as_handle(handle_), stream), "cudnnSetStream");
  check_fe(
      g.bwd->execute(as_handle(handle_), pack, workspace_for(g, g.bwd_workspace, workspace_offset)),
      "backward");
}

}  // namespace railyard::cuda
