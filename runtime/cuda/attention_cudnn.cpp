#include "attention_cudnn.hpp"

#include <cudnn.h>

#include <cudnn_frontend.h>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "cuda_check.hpp"

namespace railyard::cuda {

namespace fe = cudnn_frontend;

namespace {

void check_cudnn(cudnnStatus_t st, const char* what) {
  if (st != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuDNN: ") + what + " failed: " + cudnnGetErrorString(st) +
                             "; check that libcudnn 9 matches the driver (docs/gpu.md)");
  }
}

void check_fe(fe::error_t e, const char* what) {
  if (e.is_bad()) {
    throw std::runtime_error(std::string("cuDNN attention: ") + what + ": " + e.get_message() +
                             "; build with -DRAILYARD_CUDNN=OFF to use the built-in attention");
  }
}

cudnnHandle_t as_handle(void* h) {
  return static_cast<cudnnHandle_t>(h);
}

// Tensor ids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

using Tensor = std::shared_ptr<fe::graph::Tensor_attributes>;

// [B, H, T, hd] views: q, k, v (and their gradients) by stride inside [B, T, 3, H, hd]; o, do
// inside [B, T, H, hd].
Tensor qkv_view(fe::graph::Graph& g, const char* name, int64_t uid, const AttentionShape& s) {
  const int64_t H = s.H, T = s.T, D = s.hd;
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({s.B, H, T, D})
                      .set_stride({T * 3 * H * D, D, 3 * H * D, 1}));
}

Tensor out_view(fe::graph::Graph& g, const char* name, int64_t uid, const AttentionShape& s) {
  const int64_t H = s.H, T = s.T, D = s.hd;
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({s.B, H, T, D})
                      .set_stride({T * H * D, D, H * D, 1}));
}

Tensor stats_view(fe::graph::Graph& g, const AttentionShape& s) {
  const int64_t H = s.H, T = s.T;
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name("stats")
                      .set_uid(kStats)
                      .set_dim({s.B, H, T, 1})
                      .set_stride({H * T, T, 1, 1})
                      .set_data_type(fe::DataType_t::FLOAT));
}

std::shared_ptr<fe::graph::Graph> new_graph() {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

void build(fe::graph::Graph& g, cudnnHandle_t h, const char* what) {
  check_fe(g.validate(), what);
  check_fe(g.build_operation_graph(h), what);
  check_fe(g.create_execution_plans({fe::HeurMode_t::A}), what);
  check_fe(g.check_support(h), what);
  check_fe(g.build_plans(h), what);
}

std::shared_ptr<fe::graph::Graph> forward_graph(cudnnHandle_t h, const AttentionShape& s) {
  auto g = new_graph();
  Tensor q = qkv_view(*g, "q", kQ, s), k = qkv_view(*g, "k", kK, s), v = qkv_view(*g, "v", kV, s);
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("attention")
                  .set_generate_stats(true)
                  .set_causal_mask(true)
                  .set_attn_scale(1.0f / std::sqrt(float(s.hd)));
  auto [o, stats] = g->sdpa(q, k, v, opts);
  const int64_t H = s.H, T = s.T, D = s.hd;
  o->set_output(true).set_uid(kO).set_dim({s.B, H, T, D}).set_stride({T * H * D, D, H * D, 1});
  stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT);
  build(*g, h, "forward graph");
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(cudnnHandle_t h, const AttentionShape& s) {
  auto g = new_graph();
  Tensor q = qkv_view(*g, "q", kQ, s), k = qkv_view(*g, "k", kK, s), v = qkv_view(*g, "v", kV, s);
  Tensor o = out_view(*g, "o", kO, s), d_o = out_view(*g, "do", kDO, s);
  Tensor stats = stats_view(*g, s);
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("attention backward")
                  .set_causal_mask(true)
                  .set_attn_scale(1.0f / std::sqrt(float(s.hd)))
                  .set_deterministic_algorithm(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, opts);
  const int64_t H = s.H, T = s.T, D = s.hd;
  const int64_t uids[3] = {kDQ, kDK, kDV};
  int i = 0;
  for (const Tensor& t : {dq, dk, dv}) {
    t->set_output(true)
        .set_uid(uids[i++])
        .set_dim({s.B, H, T, D})
        .set_stride({T * 3 * H * D, D, 3 * H * D, 1});
  }
  build(*g, h, "backward graph");
  return g;
}

size_t workspace_of(const fe::graph::Graph& g) {
  int64_t bytes = 0;
  check_fe(g.get_workspace_size(bytes), "workspace size");
  return bytes > 0 ? size_t(bytes) : 0;
}

}  // namespace

struct CudnnAttention::Graphs {
  std::shared_ptr<fe::graph::Graph> fwd, bwd;
  size_t workspace = 0;
};

CudnnAttention::CudnnAttention() {
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
  g->fwd = forward_graph(as_handle(handle_), s);
  g->bwd = backward_graph(as_handle(handle_), s);
  g->workspace = std::max(workspace_of(*g->fwd), workspace_of(*g->bwd));
  return *graphs_.emplace(key, std::move(g)).first->second;
}

size_t CudnnAttention::prepare(const AttentionShape& s) {
  return graphs_for(s).workspace;
}

void CudnnAttention::set_workspace(void* ptr, size_t bytes) {
  workspace_ = ptr;
  workspace_bytes_ = bytes;
}

void* CudnnAttention::workspace_for(size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  // A shape other than the planned one (an evaluation batch, say) that needs more.
  if (bytes > overflow_.bytes()) overflow_ = DeviceBuffer(bytes);
  return overflow_.as<void>();
}

void CudnnAttention::forward(bf16* out, float* stats, const bf16* qkv, const AttentionShape& s,
                             cudaStream_t stream) {
  Graphs& g = graphs_for(s);
  const size_t hd = size_t(s.H) * s.hd;
  bf16* base = const_cast<bf16*>(qkv);  // the variant pack takes non-const pointers
  std::unordered_map<int64_t, void*> pack{
      {kQ, base}, {kK, base + hd}, {kV, base + 2 * hd}, {kO, out}, {kStats, stats}};
  check_cudnn(cudnnSetStream(as_handle(handle_), stream), "cudnnSetStream");
  check_fe(g.fwd->execute(as_handle(handle_), pack, workspace_for(g.workspace)), "forward");
}

void CudnnAttention::backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* stats,
                              const bf16* qkv, const AttentionShape& s, cudaStream_t stream) {
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
  check_fe(g.bwd->execute(as_handle(handle_), pack, workspace_for(g.workspace)), "backward");
}

}  // namespace railyard::cuda
