#pragma once
// cuDNN's SDPA graphs for causal self-attention, declared through cudnn-frontend and lowered to
// cuDNN's operation graph, with no execution plan chosen yet: CudnnAttention picks the
// heuristic's first plan, bench/cudnn_sdpa_plans lists and times all of them. Q, K and V (and
// their gradients) are read by stride from [B, T, 3, H, hd]; O and dO are [B, T, H, hd]; the
// softmax statistics are fp32 [B, H, T]. The variant packs name tensors by the ids in Uid.
// Included only where cudnn_frontend.h is (RAILYARD_HAVE_CUDNN).

#include <cudnn.h>

#include <cudnn_frontend.h>
#include <memory>

#include "attention.hpp"

namespace railyard::cuda::sdpa {

namespace fe = cudnn_frontend;

// Tensor ids of the variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

// Throws with the frontend's message and `what` where `e` is an error.
void check_fe(fe::error_t e, const char* what);

// out [B, T, H*hd] and stats from q, k, v: validated and lowered, plans not yet created.
std::shared_ptr<fe::graph::Graph> forward_graph(cudnnHandle_t h, const AttentionShape& s);

// dq, dk, dv from q, k, v, o, do and stats, likewise. `deterministic` asks cuDNN for its
// deterministic algorithm (dQ summed in a fixed order, no atomics).
std::shared_ptr<fe::graph::Graph> backward_graph(cudnnHandle_t h, const AttentionShape& s,
                                                 bool deterministic);

}  // namespace railyard::cuda::sdpa
