#pragma once
// Causal multi-head self-attention fused into one forward and one backward kernel (flash
// attention) by cuDNN's SDPA graphs, built through the cudnn-frontend headers. Nothing T x T is
// kept: the forward pass saves its output and the softmax statistics (log-sum-exp per row),
// from which the backward pass recomputes the probabilities. Q, K and V are read by stride
// straight from the QKV projection's output [B, T, 3, H, hd]; the output is written as
// [B, T, H, hd] (the heads side by side, what the output projection reads), and the backward
// pass writes dQKV in the projection's layout. bf16 only (cuDNN's SDPA has no fp32 path); the
// backward graph asks for cuDNN's deterministic algorithm, so results are the same bits every
// run. Graphs are built once per shape and cached. Each graph builds the heuristic's first plan
// that builds, or the plan attention_plan_pin's table names for this GPU, cuDNN and shape.

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "attention.hpp"
#include "attention_plan_pin.hpp"
#include "device_buffer.hpp"
#include "dtype.hpp"

namespace railyard::cuda {

// The execution plan one graph built, and the one the pin table asked for ("" if none).
struct SdpaPlanChoice {
  std::string built, pinned;
  // "eng2_k24=7 pinned", "eng2_k24=26", or "eng2_k24=32 (pinned eng2_k24=7 not built)".
  std::string describe() const;
};

class CudnnAttention {
 public:
  CudnnAttention();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Builds the graphs for `s` (if not yet built) and returns the workspace bytes the larger of
  // forward and backward needs. Throws with cuDNN's reason where the shape is unsupported.
  size_t prepare(const AttentionShape& s);
  // The workspace bytes `s`'s forward or backward graph needs (building the graphs if needed).
  size_t workspace_bytes(const AttentionShape& s, SdpaGraph graph);
  // The workspace from the allocation plan; a shape needing more gets its own buffer.
  void set_workspace(void* ptr, size_t bytes);

  // out [B, T, H*hd] and stats [B, H, T] (fp32) from qkv [B, T, 3, H, hd]. `workspace_offset`:
  // where in the planned workspace this call's starts (a staggered call, memset_stagger.hpp); it
  // must fit there (std::logic_error otherwise).
  void forward(bf16* out, float* stats, const bf16* qkv, const AttentionShape& s,
               cudaStream_t stream, size_t workspace_offset = 0);
  // dqkv [B, T, 3, H, hd] from dout [B, T, H*hd] and what forward saved.
  void backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* stats, const bf16* qkv,
                const AttentionShape& s, cudaStream_t stream, size_t workspace_offset = 0);

  // The plan built for `s`'s forward or backward graph (building the graphs if needed).
  const SdpaPlanChoice& plan(const AttentionShape& s, SdpaGraph graph);
  // "fwd eng2_k24=7 pinned, bwd eng2_k24=26": what a run report says of `s`'s attention.
  std::string describe(const AttentionShape& s);
  // The pin table's key for `s` on this GPU and the loaded libcudnn.
  SdpaPlanKey plan_key(const AttentionShape& s, SdpaGraph graph) const;

  // Elements of the per-layer statistics forward saves.
  static size_t stats_elems(const AttentionShape& s) { return size_t(s.B) * s.H * s.T; }

 private:
  struct Graphs;
  Graphs& graphs_for(const AttentionShape& s);
  // The workspace of a call of `g` needing `bytes`, at `offset` in the planned one.
  void* workspace_for(const Graphs& g, size_t bytes, size_t offset);

  void* handle_ = nullptr;  // cudnnHandle_t, kept opaque so this header needs no cuDNN
  std::map<std::pair<int, int>, std::unique_ptr<Graphs>> graphs_;  // by (B, T)
  int heads_ = 0, head_dim_ = 0;
  int sm_ = 0;  // the current device's compute capability, major * 10 + minor
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  DeviceBuffer overflow_;
};

}  // namespace railyard::cuda
