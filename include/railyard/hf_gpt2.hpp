#pragma once
// railyard's GPT as a Hugging Face transformers GPT-2 (GPT2LMHeadModel): the config.json
// fields and the tensor names, shapes and orientation of its model.safetensors.
//
// The maths are the same (docs/model.md): pre-LayerNorm blocks with biases, LayerNorm epsilon
// 1e-5, GELU with the tanh approximation ("gelu_new"), attention scaled by 1/sqrt(head_dim),
// MLP 4 x n_embd, learned positions, LM head tied to wte, no dropout. transformers' Conv1D
// stores weights [in, out], railyard [out, in], so the four matrices of each block are
// transposed; wte has `vocab_size` rows there and railyard's padding rows are cut (they are
// never scored, so the logits over the real vocabulary are unchanged).

#include <string>
#include <string_view>
#include <vector>

#include "railyard/gpt_config.hpp"

namespace railyard {

// The fields railyard needs from a GPT-2 config.json.
struct HfGpt2Config {
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_positions = 0;
  int vocab_size = 0;
};

// Parses config.json text. Refuses, naming the field and both values, anything that is not a
// GPT-2 with railyard's maths: model_type other than "gpt2", an activation other than the tanh
// GELU, another LayerNorm epsilon, n_inner other than 4 n_embd, an untied head, cross-attention,
// unscaled or layer-scaled attention. Throws std::invalid_argument.
HfGpt2Config parse_hf_gpt2_config(std::string_view json_text);

// config.json for a model of this shape (vocab_size = cfg.vocab, dropout 0 like railyard).
std::string hf_gpt2_config_json(const GptConfig& cfg);

// railyard's model shape for an HF config (vocabulary padded as railyard-train pads it).
GptConfig gpt_config_from_hf(const HfGpt2Config& hf);

// One tensor of the transformers layout and where it lives in railyard's flat parameters.
struct HfTensor {
  std::string hf_name;         // e.g. "transformer.h.0.attn.c_attn.weight"
  std::string name;            // railyard's, e.g. "h.0.attn.qkv.weight"
  std::vector<int64_t> shape;  // transformers' shape
  bool transposed = false;     // Conv1D: [in, out] there, [out, in] here
};

// Every tensor transformers' GPT2LMHeadModel loads (lm_head.weight is tied to wte and not
// stored), in railyard's order.
std::vector<HfTensor> hf_gpt2_tensors(const GptConfig& cfg);

// Copies tensor `t` out of railyard's flat `params` into `out` (product of t.shape values).
void to_hf_tensor(const ParamLayout& layout, const HfTensor& t, const float* params, float* out);
// Copies `in` (transformers' layout of `t`) into railyard's flat `params`.
void from_hf_tensor(const ParamLayout& layout, const HfTensor& t, const float* in, float* params);

}  // namespace railyard
