#include "railyard/gpt_cpu.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "railyard/cpu_kernels.hpp"

namespace railyard {
namespace {

template <typename T>
void zero(std::vector<T>& v, size_t n) {
  std::fill(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n), T(0));
}

}  // namespace

template <typename T>
GptCpu<T>::GptCpu(const GptConfig& cfg, int max_batch, int max_seq)
    : cfg_(cfg), layout_(gpt_param_layout(cfg)), max_batch_(max_batch), max_seq_(max_seq) {
  if (max_batch < 1) {
    throw std::invalid_argument("GptCpu: batch must be at least 1, got " +
                                std::to_string(max_batch));
  }
  if (max_seq < 1 || max_seq > cfg.max_seq) {
    throw std::invalid_argument("GptCpu: sequence length " + std::to_string(max_seq) +
                                " must be in [1, max_seq=" + std::to_string(cfg.max_seq) + "]");
  }
  wte_ = layout_.at("wte").offset;
  wpe_ = layout_.at("wpe").offset;
  lnfw_ = layout_.at("lnf.weight").offset;
  lnfb_ = layout_.at("lnf.bias").offset;
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    auto at = [&](const char* n) { return layout_.at(p + n).offset; };
    lp_.push_back({at("ln1.weight"), at("ln1.bias"), at("attn.qkv.weight"), at("attn.qkv.bias"),
                   at("attn.proj.weight"), at("attn.proj.bias"), at("ln2.weight"), at("ln2.bias"),
                   at("mlp.fc.weight"), at("mlp.fc.bias"), at("mlp.proj.weight"),
                   at("mlp.proj.bias")});
  }

  const size_t N = static_cast<size_t>(max_batch) * static_cast<size_t>(max_seq);
  const size_t C = static_cast<size_t>(cfg.dim);
  const size_t att = static_cast<size_t>(max_batch) * cfg.heads * max_seq * max_seq;
  encoded_.resize(N * C);
  acts_.resize(cfg.layers);
  for (LayerActs& a : acts_) {
    a.ln1.resize(N * C);
    a.ln1_mean.resize(N);
    a.ln1_rstd.resize(N);
    a.qkv.resize(N * 3 * C);
    a.att.resize(att);
    a.atty.resize(N * C);
    a.resid2.resize(N * C);
    a.ln2.resize(N * C);
    a.ln2_mean.resize(N);
    a.ln2_rstd.resize(N);
    a.fch.resize(N * 4 * C);
    a.fch_gelu.resize(N * 4 * C);
    a.resid3.resize(N * C);
  }
  branch_.resize(N * C);
  lnf_.resize(N * C);
  lnf_mean_.resize(N);
  lnf_rstd_.resize(N);
  probs_.resize(N * static_cast<size_t>(cfg.padded_vocab));
  losses_.resize(N);
  dresid_.resize(N * C);
  dln_.resize(N * C);
  dqkv_.resize(N * 3 * C);
  datty_.resize(N * C);
  dfch_.resize(N * 4 * C);
  dfch_gelu_.resize(N * 4 * C);
  dlosses_.resize(N);
}

template <typename T>
void GptCpu<T>::check_batch(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                            int B, int Tn) const {
  if (B < 1 || Tn < 1 || B > max_batch_ || Tn > max_seq_) {
    throw std::invalid_argument("GptCpu: batch " + std::to_string(B) + "x" + std::to_string(Tn) +
                                " does not fit the allocation " + std::to_string(max_batch_) + "x" +
                                std::to_string(max_seq_));
  }
  const size_t n_tok = static_cast<size_t>(B) * static_cast<size_t>(Tn);
  if (tokens.size() != n_tok || targets.size() != n_tok) {
    throw std::invalid_argument("GptCpu: expected " + std::to_string(n_tok) +
                                " tokens and targets, got " + std::to_string(tokens.size()) +
                                " and " + std::to_string(targets.size()));
  }
  const int V = cfg_.vocab;
  for (size_t i = 0; i < n_tok; ++i) {
    if (tokens[i] < 0 || tokens[i] >= V) {
      throw std::invalid_argument("GptCpu: token " + std::to_string(tokens[i]) + " at position " +
                                  std::to_string(i) + " is outside the vocabulary [0, " +
                                  std::to_string(V) + ")");
    }
    if (targets[i] >= V) {
      throw std::invalid_argument("GptCpu: target " + std::to_string(targets[i]) + " at position " +
                                  std::to_string(i) + " is outside the vocabulary [0, " +
                                  std::to_string(V) + ") (negative targets are ignored)");
    }
  }
}

template <typename T>
T GptCpu<T>::forward(const T* params, std::span<const int32_t> tokens,
                     std::span<const int32_t> targets, int B, int Tn) {
  check_batch(tokens, targets, B, Tn);
  tokens_.assign(tokens.begin(), tokens.end());
  targets_.assign(targets.begin(), targets.end());
  B_ = B;
  T_ = Tn;
  forward_logits(params);
  const int N = B * Tn;
  counted_ = cpu::softmax_crossentropy_forward(losses_.data(), probs_.data(), probs_.data(),
                                               targets_.data(), N, cfg_.vocab, cfg_.padded_vocab);
  have_forward_ = true;
  if (counted_ == 0) return T(0);
  // Summed in position order, so the loss does not depend on anything but the data.
  T sum = 0;
  for (int i = 0; i < N; ++i) sum += losses_[i];
  return sum / T(counted_);
}

template <typename T>
std::span<const T> GptCpu<T>::logits(const T* params, std::span<const int32_t> tokens, int B,
                                     int Tn) {
  check_batch(tokens, tokens, B, Tn);
  tokens_.assign(tokens.begin(), tokens.end());
  B_ = B;
  T_ = Tn;
  have_forward_ = false;  // no softmax: a backward would read logits as probabilities
  forward_logits(params);
  return {probs_.data(), static_cast<size_t>(B) * Tn * static_cast<size_t>(cfg_.padded_vocab)};
}

template <typename T>
void GptCpu<T>::forward_logits(const T* params) {
  const int B = B_, Tn = T_, N = B * Tn;
  const int C = cfg_.dim;
  const int64_t NC = static_cast<int64_t>(N) * C;
  cpu::encoder_forward(encoded_.data(), tokens_.data(), params + wte_, params + wpe_, B, Tn, C);
  const T* residual = encoded_.data();
  for (int l = 0; l < cfg_.layers; ++l) {
    LayerActs& a = acts_[l];
    const LayerParams& p = lp_[l];
    cpu::layernorm_forward(a.ln1.data(), a.ln1_mean.data(), a.ln1_rstd.data(), residual,
                           params + p.ln1w, params + p.ln1b, N, C);
    cpu::matmul_forward(a.qkv.data(), a.ln1.data(), params + p.qkvw, params + p.qkvb, N, C, 3 * C);
    cpu::attention_forward(a.atty.data(), a.att.data(), a.qkv.data(), B, Tn, C, cfg_.heads);
    cpu::matmul_forward(branch_.data(), a.atty.data(), params + p.projw, params + p.projb, N, C, C);
    cpu::residual_forward(a.resid2.data(), residual, branch_.data(), NC);
    cpu::layernorm_forward(a.ln2.data(), a.ln2_mean.data(), a.ln2_rstd.data(), a.resid2.data(),
                           params + p.ln2w, params + p.ln2b, N, C);
    cpu::matmul_forward(a.fch.data(), a.ln2.data(), params + p.fcw, params + p.fcb, N, C, 4 * C);
    cpu::gelu_forward(a.fch_gelu.data(), a.fch.data(), 4 * NC);
    cpu::matmul_forward(branch_.data(), a.fch_gelu.data(), params + p.fcprojw, params + p.fcprojb,
                        N, 4 * C, C);
    cpu::residual_forward(a.resid3.data(), a.resid2.data(), branch_.data(), NC);
    residual = a.resid3.data();
  }
  cpu::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), residual, params + lnfw_,
                         params + lnfb_, N, C);
  // LM head tied to the token embedding, into probs_ (forward turns them into probabilities).
  cpu::matmul_forward(probs_.data(), lnf_.data(), params + wte_, static_cast<const T*>(nullptr), N,
                      C, cfg_.padded_vocab);
}

template <typename T>
void GptCpu<T>::backward(const T* params, T* grads, T grad_scale) {
  if (!have_forward_) {
    throw std::logic_error(
        "GptCpu::backward needs a forward first (the probabilities are "
        "overwritten by the first backward)");
  }
  have_forward_ = false;
  if (counted_ == 0) return;  // every position ignored: the loss is constant

  const int B = B_, Tn = T_, N = B * Tn, C = cfg_.dim, Vp = cfg_.padded_vocab;
  const size_t NC = static_cast<size_t>(N) * C;
  const T dl = grad_scale / T(counted_);
  for (int i = 0; i < N; ++i) dlosses_[i] = dl;
  // The logit gradient replaces the probabilities in place.
  T* dlogits = probs_.data();
  cpu::softmax_crossentropy_backward(dlogits, probs_.data(), dlosses_.data(), targets_.data(), N,
                                     cfg_.vocab, Vp);
  zero(dln_, NC);
  cpu::matmul_backward(dln_.data(), grads + wte_, static_cast<T*>(nullptr), dlogits, lnf_.data(),
                       params + wte_, N, C, Vp);
  const T* last = cfg_.layers > 0 ? acts_.back().resid3.data() : encoded_.data();
  zero(dresid_, NC);
  cpu::layernorm_backward(dresid_.data(), grads + lnfw_, grads + lnfb_, dln_.data(), last,
                          params + lnfw_, lnf_mean_.data(), lnf_rstd_.data(), N, C);

  // dresid_ holds the gradient of the residual stream. A residual add passes it unchanged to
  // both of its inputs, so each branch reads dresid_ as its output gradient and adds its input
  // gradient back into dresid_ (the LayerNorm backward accumulates) instead of copying it.
  for (int l = cfg_.layers - 1; l >= 0; --l) {
    LayerActs& a = acts_[l];
    const LayerParams& p = lp_[l];
    const T* residual = l == 0 ? encoded_.data() : acts_[l - 1].resid3.data();

    zero(dfch_gelu_, 4 * NC);
    cpu::matmul_backward(dfch_gelu_.data(), grads + p.fcprojw, grads + p.fcprojb, dresid_.data(),
                         a.fch_gelu.data(), params + p.fcprojw, N, 4 * C, C);
    zero(dfch_, 4 * NC);
    cpu::gelu_backward(dfch_.data(), a.fch.data(), dfch_gelu_.data(), static_cast<int64_t>(4 * NC));
    zero(dln_, NC);
    cpu::matmul_backward(dln_.data(), grads + p.fcw, grads + p.fcb, dfch_.data(), a.ln2.data(),
                         params + p.fcw, N, C, 4 * C);
    cpu::layernorm_backward(dresid_.data(), grads + p.ln2w, grads + p.ln2b, dln_.data(),
                            a.resid2.data(), params + p.ln2w, a.ln2_mean.data(), a.ln2_rstd.data(),
                            N, C);

    zero(datty_, NC);
    cpu::matmul_backward(datty_.data(), grads + p.projw, grads + p.projb, dresid_.data(),
                         a.atty.data(), params + p.projw, N, C, C);
    zero(dqkv_, 3 * NC);
    cpu::attention_backward(dqkv_.data(), datty_.data(), a.qkv.data(), a.att.data(), B, Tn, C,
                            cfg_.heads);
    zero(dln_, NC);
    cpu::matmul_backward(dln_.data(), grads + p.qkvw, grads + p.qkvb, dqkv_.data(), a.ln1.data(),
                         params + p.qkvw, N, C, 3 * C);
    cpu::layernorm_backward(dresid_.data(), grads + p.ln1w, grads + p.ln1b, dln_.data(), residual,
                            params + p.ln1w, a.ln1_mean.data(), a.ln1_rstd.data(), N, C);
  }
  cpu::encoder_backward(grads + wte_, grads + wpe_, dresid_.data(), tokens_.data(), B, Tn, C);
}

template class GptCpu<float>;
template class GptCpu<double>;

}  // namespace railyard
