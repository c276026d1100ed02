#include "railyard/gpt_config.hpp"

#include <cmath>
#include <cstring>
#include <numbers>
#include <stdexcept>
#include <string>

#include "railyard/splitmix64.hpp"

namespace railyard {
namespace {

void require_positive(const char* field, int value) {
  if (value <= 0) {
    throw std::invalid_argument("GptConfig: " + std::string(field) + " must be positive, got " +
                                std::to_string(value));
  }
}

// FNV-1a of the tensor name: a tensor's values depend on its name, not on its position in
// the layout, so adding a tensor elsewhere leaves the others unchanged.
uint64_t name_hash(const std::string& name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Uniform in (0, 1]: 53 random bits, never 0 (Box-Muller takes its log).
double unit_uniform(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53;
}

// Fills n values with normal(0, std) by Box-Muller over counter-based uniforms.
void fill_normal(float* out, size_t n, uint64_t key, double std) {
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t pair = i / 2;
    const double u1 = unit_uniform(splitmix64(key ^ splitmix64(2 * pair)));
    const double u2 = unit_uniform(splitmix64(key ^ splitmix64(2 * pair + 1)));
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    out[i] = static_cast<float>(std * r * std::cos(theta));
    if (i + 1 < n) out[i + 1] = static_cast<float>(std * r * std::sin(theta));
  }
}

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

void GptConfig::validate() const {
  require_positive("vocab", vocab);
  require_positive("padded_vocab", padded_vocab);
  require_positive("max_seq", max_seq);
  require_positive("layers", layers);
  require_positive("heads", heads);
  require_positive("dim", dim);
  if (padded_vocab < vocab) {
    throw std::invalid_argument("GptConfig: padded_vocab (" + std::to_string(padded_vocab) +
                                ") must be at least vocab (" + std::to_string(vocab) + ")");
  }
  if (dim % heads != 0) {
    throw std::invalid_argument("GptConfig: heads (" + std::to_string(heads) +
                                ") must divide dim (" + std::to_string(dim) + ")");
  }
}

double GptConfig::flops_per_token(int seq) const {
  // 6 FLOPs per parameter per token (forward 2, backward 4), plus the attention products:
  // QK^T and att*V cost 2*2*T*C per token and layer forward, halved by the causal mask, x3 for
  // backward. For GPT-2 small at T=1024 this gives ~803 MFLOP.
  const double C = dim, L = layers, V = padded_vocab;
  const double params =
      V * C + static_cast<double>(max_seq) * C + L * (12.0 * C * C + 13.0 * C) + 2.0 * C;
  return 6.0 * params + 6.0 * L * C * seq;
}

int padded_vocab_for(int vocab) {
  return (vocab + 127) / 128 * 128;
}

ParamLayout gpt_param_layout(const GptConfig& cfg) {
  cfg.validate();
  const int64_t C = cfg.dim;
  ParamLayout layout;
  layout.add("wte", {cfg.padded_vocab, C}, true);
  layout.add("wpe", {cfg.max_seq, C}, true);
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    layout.add(p + "ln1.weight", {C}, false);
    layout.add(p + "ln1.bias", {C}, false);
    layout.add(p + "attn.qkv.weight", {3 * C, C}, true);
    layout.add(p + "attn.qkv.bias", {3 * C}, false);
    layout.add(p + "attn.proj.weight", {C, C}, true);
    layout.add(p + "attn.proj.bias", {C}, false);
    layout.add(p + "ln2.weight", {C}, false);
    layout.add(p + "ln2.bias", {C}, false);
    layout.add(p + "mlp.fc.weight", {4 * C, C}, true);
    layout.add(p + "mlp.fc.bias", {4 * C}, false);
    layout.add(p + "mlp.proj.weight", {C, 4 * C}, true);
    layout.add(p + "mlp.proj.bias", {C}, false);
  }
  layout.add("lnf.weight", {C}, false);
  layout.add("lnf.bias", {C}, false);
  return layout;
}

double gpt_param_count(const GptConfig& cfg) {
  // Each tensor rounds up to ParamLayout::kAlign elements; counting one pad per tensor bounds it.
  const double C = cfg.dim, pad = ParamLayout::kAlign;
  const double per_layer = 12 * C * C + 13 * C + 12 * pad;
  return (cfg.padded_vocab + cfg.max_seq) * C + cfg.layers * per_layer + 2 * C + 4 * pad;
}

void gpt_init_params(const GptConfig& cfg, const ParamLayout& layout, uint64_t seed,
                     float* params) {
  cfg.validate();
  std::memset(params, 0, layout.total() * sizeof(float));
  const double std_base = 0.02;
  const double std_resid = 0.02 / std::sqrt(2.0 * cfg.layers);
  for (const TensorSpec& t : layout.tensors()) {
    float* p = params + t.offset;
    const uint64_t key = splitmix64(seed ^ name_hash(t.name));
    if (t.shape.size() == 2) {
      const bool resid =
          ends_with(t.name, "attn.proj.weight") || ends_with(t.name, "mlp.proj.weight");
      size_t n = t.numel;
      // Only the real vocabulary rows of the token embedding are drawn; padding stays zero.
      if (t.name == "wte") n = static_cast<size_t>(cfg.vocab) * static_cast<size_t>(cfg.dim);
      fill_normal(p, n, key, resid ? std_resid : std_base);
    } else if (ends_with(t.name, ".weight")) {
      for (size_t i = 0; i < t.numel; ++i) p[i] = 1.0f;  // LayerNorm gain
    }
    // Biases stay zero.
  }
}

}  // namespace railyard
