#pragma once
// The shape of a GPT model, independent of backend.

#include <cstdint>
#include <string>

#include "railyard/param_layout.hpp"

namespace railyard {

struct GptConfig {
  int vocab = 256;         // tokens the data may contain
  int padded_vocab = 256;  // rows of the embedding / LM head (vocab rounded up, e.g. 50257->50304)
  int max_seq = 256;       // position embedding rows
  int layers = 4;
  int heads = 4;
  int dim = 256;

  // Throws std::invalid_argument naming the field and what is allowed.
  void validate() const;
  int head_dim() const { return dim / heads; }
  // Approximate training FLOPs per token (6N + attention), for MFU.
  double flops_per_token(int seq) const;
};

// The fields that define a GptConfig, by name, in one fixed order: what checkpoints store as
// attributes of /model and checksum, and what exports and tools list. The one place that
// names them, so a new field reaches every reader and writer.
struct GptConfigField {
  const char* name;
  int GptConfig::*member;
};
inline constexpr GptConfigField kGptConfigFields[] = {
    {"vocab", &GptConfig::vocab},     {"padded_vocab", &GptConfig::padded_vocab},
    {"max_seq", &GptConfig::max_seq}, {"layers", &GptConfig::layers},
    {"heads", &GptConfig::heads},     {"dim", &GptConfig::dim}};

// The embedding rows railyard-train uses for a vocabulary: rounded up to a multiple of 128
// (GPT-2: 50257 -> 50304), so the LM-head matrix products run on aligned shapes.
int padded_vocab_for(int vocab);

// Tensor names and shapes, in this order:
//   wte [padded_vocab, dim] (tied LM head), wpe [max_seq, dim],
//   per layer l: h.l.ln1.weight [dim], h.l.ln1.bias [dim],
//                h.l.attn.qkv.weight [3*dim, dim], h.l.attn.qkv.bias [3*dim],
//                h.l.attn.proj.weight [dim, dim], h.l.attn.proj.bias [dim],
//                h.l.ln2.weight [dim], h.l.ln2.bias [dim],
//                h.l.mlp.fc.weight [4*dim, dim], h.l.mlp.fc.bias [4*dim],
//                h.l.mlp.proj.weight [dim, 4*dim], h.l.mlp.proj.bias [dim],
//   lnf.weight [dim], lnf.bias [dim].
// Linear weights are [out, in] (y = x W^T + b), as in PyTorch, so exports load unchanged.
// Decay applies to the 2-D matrices and embeddings; not to biases or LayerNorm.
ParamLayout gpt_param_layout(const GptConfig& cfg);

// The number of elements gpt_param_layout(cfg) would hold (padding included), computed without
// building it and without overflow (a double), so a caller can refuse a model too large for
// memory, or for the file that claims to hold it, before allocating anything.
double gpt_param_count(const GptConfig& cfg);

// GPT-2 initialisation into `params` (layout from gpt_param_layout): normal(0, 0.02) for
// matrices and embeddings, 0.02/sqrt(2*layers) for attn.proj and mlp.proj weights, zeros for
// biases, ones for LayerNorm weights; padded vocab rows are zero. Deterministic in `seed`
// and independent of backend and rank count.
void gpt_init_params(const GptConfig& cfg, const ParamLayout& layout, uint64_t seed, float* params);

}  // namespace railyard
