#include "attention_cudnn_graph.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace railyard::cuda::sdpa {

namespace {

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

void lower(fe::graph::Graph& g, cudnnHandle_t h, const char* what) {
  check_fe(g.validate(), what);
  check_fe(g.build_operation_graph(h), what);
}

}  // namespace

void check_fe(fe::error_t e, const char* what) {
  if (e.is_bad()) {
    throw std::runtime_error(std::string("cuDNN attention: ") + what + ": " + e.get_message() +
                             "; build with -DRAILYARD_CUDNN=OFF to use the built-in attention");
  }
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
  lower(*g, h, "forward graph");
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(cudnnHandle_t h, const AttentionShape& s,
                                                 bool deterministic) {
  auto g = new_graph();
  Tensor q = qkv_view(*g, "q", kQ, s), k = qkv_view(*g, "k", kK, s), v = qkv_view(*g, "v", kV, s);
  Tensor o = out_view(*g, "o", kO, s), d_o = out_view(*g, "do", kDO, s);
  Tensor stats = stats_view(*g, s);
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("attention backward")
                  .set_causal_mask(true)
                  .set_attn_scale(1.0f / std::sqrt(float(s.hd)))
                  .set_deterministic_algorithm(deterministic);
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
  lower(*g, h, "backward graph");
  return g;
}

}  // namespace railyard::cuda::sdpa
