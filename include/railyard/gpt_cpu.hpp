#pragma once
// GPT forward and backward on CPU over the flat parameter layout of gpt_param_layout.
// Activations are allocated once for the largest batch (B, T) given at construction; any
// smaller batch runs in the same buffers. T is float (training) or double (gradient checks).
//
// Tokens must lie in [0, vocab). A target in [0, vocab) is scored; a negative target means
// "ignore this position" (no loss, no gradient). The loss is the mean over scored positions
// (0 when none is scored).

#include <cstdint>
#include <span>
#include <vector>

#include "railyard/gpt_config.hpp"
#include "railyard/param_layout.hpp"

namespace railyard {

template <typename T>
class GptCpu {
 public:
  // Allocates for batches up to max_batch x max_seq. Throws std::invalid_argument for an
  // invalid config, max_batch < 1, or max_seq outside [1, cfg.max_seq].
  GptCpu(const GptConfig& cfg, int max_batch, int max_seq);

  const GptConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }

  // Runs the model on B x T tokens (row-major) with `params` (layout().total() elements) and
  // returns the mean loss. Keeps what backward needs. Throws std::invalid_argument on a token
  // or target outside the vocabulary or a batch larger than the allocation.
  T forward(const T* params, std::span<const int32_t> tokens, std::span<const int32_t> targets,
            int B, int Tn);
  // The logits [B*Tn, padded_vocab] on B x Tn tokens (columns past vocab: the padding rows'
  // zeros), valid until the next call. Invalidates the last forward for backward. Throws like
  // forward.
  std::span<const T> logits(const T* params, std::span<const int32_t> tokens, int B, int Tn);
  // Gradient of grad_scale * (the last forward's mean loss), ADDED into grads
  // (layout().total() elements). `params` must be those of that forward.
  void backward(const T* params, T* grads, T grad_scale);

 private:
  struct LayerActs {
    std::vector<T> ln1, ln1_mean, ln1_rstd, qkv, att, atty, resid2, ln2, ln2_mean, ln2_rstd, fch,
        fch_gelu, resid3;
  };
  struct LayerParams {
    size_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
  };

  void check_batch(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                   int Tn) const;
  // Embedding, blocks, final LayerNorm and LM head on tokens_ (B_ x T_) into probs_.
  void forward_logits(const T* params);

  GptConfig cfg_;
  ParamLayout layout_;
  int max_batch_, max_seq_;
  size_t wte_, wpe_, lnfw_, lnfb_;
  std::vector<LayerParams> lp_;

  // Forward activations.
  std::vector<T> encoded_;
  std::vector<LayerActs> acts_;
  std::vector<T> branch_;  // attention / MLP projection output before the residual add
  std::vector<T> lnf_, lnf_mean_, lnf_rstd_, losses_;
  // [N, padded_vocab]: the logits, turned into probabilities in place by forward and into
  // their gradient by backward (the largest buffer with a big vocabulary, so only one).
  std::vector<T> probs_;
  // Backward scratch, reused across layers.
  std::vector<T> dresid_, dln_, dqkv_, datty_, dfch_, dfch_gelu_, dlosses_;

  // The batch of the last forward.
  std::vector<int32_t> tokens_, targets_;
  int B_ = 0, T_ = 0, counted_ = 0;
  bool have_forward_ = false;
};

extern template class GptCpu<float>;
extern template class GptCpu<double>;

}  // namespace railyard
