#include "railyard/hf_gpt2.hpp"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace railyard {
namespace {

using nlohmann::json;

constexpr double kLayerNormEps = 1e-5;  // cpu_kernels.cpp, layernorm_kernels.cu
constexpr int kGpt2Vocab = 50257;

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument(what);
}

int required_int(const json& j, const char* key, int64_t max) {
  const auto it = j.find(key);
  if (it == j.end()) bad(std::string("has no ") + key + " (a GPT-2 config.json has it)");
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > max) {
    bad(std::string(key) + " is " + it->dump() + ", expected an integer in [1, " +
        std::to_string(max) + "]");
  }
  return static_cast<int>(it->get<int64_t>());
}

// A boolean field that must have railyard's value (absent: transformers' default applies).
void require_bool(const json& j, const char* key, bool need, const char* why) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return;
  if (!it->is_boolean() || it->get<bool>() != need) {
    bad(std::string(key) + " is " + it->dump() + ", railyard needs " + (need ? "true" : "false") +
        " (" + why + ")");
  }
}

void check_maths(const json& j, int n_embd) {
  const auto act = j.find("activation_function");
  if (act != j.end()) {
    const std::string a = act->is_string() ? act->get<std::string>() : act->dump();
    if (a != "gelu_new" && a != "gelu_pytorch_tanh") {
      bad("activation_function is '" + a +
          "', railyard's GELU is the tanh approximation ('gelu_new' or 'gelu_pytorch_tanh')");
    }
  }
  const auto eps = j.find("layer_norm_epsilon");
  if (eps != j.end() &&
      (!eps->is_number() || std::fabs(eps->get<double>() - kLayerNormEps) > 1e-12)) {
    bad("layer_norm_epsilon is " + eps->dump() + ", railyard's LayerNorm uses 1e-05");
  }
  const auto inner = j.find("n_inner");
  if (inner != j.end() && !inner->is_null() &&
      (!inner->is_number_integer() || inner->get<int64_t>() != 4 * int64_t{n_embd})) {
    bad("n_inner is " + inner->dump() +
        ", railyard's MLP is 4 x n_embd = " + std::to_string(4 * n_embd));
  }
  require_bool(j, "tie_word_embeddings", true, "the LM head is the token embedding");
  require_bool(j, "scale_attn_weights", true, "attention is scaled by 1/sqrt(head_dim)");
  require_bool(j, "scale_attn_by_inverse_layer_idx", false, "no per-layer attention scale");
  require_bool(j, "add_cross_attention", false, "a decoder-only GPT");
}

}  // namespace

HfGpt2Config parse_hf_gpt2_config(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) bad("is not a JSON object");
  const auto type = j.find("model_type");
  if (type == j.end()) bad("has no model_type; railyard reads GPT-2 directories (\"gpt2\")");
  if (!type->is_string() || type->get<std::string>() != "gpt2") {
    bad("model_type is " + type->dump() + ", railyard reads only \"gpt2\"");
  }
  HfGpt2Config c;
  c.n_embd = required_int(j, "n_embd", 1 << 16);
  c.n_layer = required_int(j, "n_layer", 1 << 10);
  c.n_head = required_int(j, "n_head", 1 << 10);
  c.n_positions = required_int(j, "n_positions", 1 << 20);
  c.vocab_size = required_int(j, "vocab_size", 1 << 24);
  if (c.n_embd % c.n_head != 0) {
    bad("n_head " + std::to_string(c.n_head) + " does not divide n_embd " +
        std::to_string(c.n_embd));
  }
  check_maths(j, c.n_embd);
  return c;
}

std::string hf_gpt2_config_json(const GptConfig& cfg) {
  const bool gpt2_vocab = cfg.vocab == kGpt2Vocab;
  nlohmann::ordered_json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", cfg.vocab},
      {"n_positions", cfg.max_seq},
      {"n_ctx", cfg.max_seq},
      {"n_embd", cfg.dim},
      {"n_layer", cfg.layers},
      {"n_head", cfg.heads},
      {"n_inner", nullptr},
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", kLayerNormEps},
      {"tie_word_embeddings", true},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      // railyard trains without dropout; fine-tuning in transformers then starts alike.
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"initializer_range", 0.02},
      // GPT-2's <|endoftext|> only means something in GPT-2's vocabulary.
      {"bos_token_id", gpt2_vocab ? json(kGpt2Vocab - 1) : json(nullptr)},
      {"eos_token_id", gpt2_vocab ? json(kGpt2Vocab - 1) : json(nullptr)},
      {"torch_dtype", "float32"},
  };
  return j.dump(2) + "\n";
}

GptConfig gpt_config_from_hf(const HfGpt2Config& hf) {
  GptConfig c;
  c.vocab = hf.vocab_size;
  c.padded_vocab = padded_vocab_for(hf.vocab_size);
  c.max_seq = hf.n_positions;
  c.layers = hf.n_layer;
  c.heads = hf.n_head;
  c.dim = hf.n_embd;
  c.validate();
  return c;
}

std::vector<HfTensor> hf_gpt2_tensors(const GptConfig& cfg) {
  const int64_t C = cfg.dim;
  std::vector<HfTensor> out = {{"transformer.wte.weight", "wte", {cfg.vocab, C}, false},
                               {"transformer.wpe.weight", "wpe", {cfg.max_seq, C}, false}};
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string hf = "transformer.h." + std::to_string(l) + ".";
    const std::string ry = "h." + std::to_string(l) + ".";
    const std::vector<HfTensor> block = {
        {hf + "ln_1.weight", ry + "ln1.weight", {C}, false},
        {hf + "ln_1.bias", ry + "ln1.bias", {C}, false},
        {hf + "attn.c_attn.weight", ry + "attn.qkv.weight", {C, 3 * C}, true},
        {hf + "attn.c_attn.bias", ry + "attn.qkv.bias", {3 * C}, false},
        {hf + "attn.c_proj.weight", ry + "attn.proj.weight", {C, C}, true},
        {hf + "attn.c_proj.bias", ry + "attn.proj.bias", {C}, false},
        {hf + "ln_2.weight", ry + "ln2.weight", {C}, false},
        {hf + "ln_2.bias", ry + "ln2.bias", {C}, false},
        {hf + "mlp.c_fc.weight", ry + "mlp.fc.weight", {C, 4 * C}, true},
        {hf + "mlp.c_fc.bias", ry + "mlp.fc.bias", {4 * C}, false},
        {hf + "mlp.c_proj.weight", ry + "mlp.proj.weight", {4 * C, C}, true},
        {hf + "mlp.c_proj.bias", ry + "mlp.proj.bias", {C}, false},
    };
    out.insert(out.end(), block.begin(), block.end());
  }
  out.push_back({"transformer.ln_f.weight", "lnf.weight", {C}, false});
  out.push_back({"transformer.ln_f.bias", "lnf.bias", {C}, false});
  return out;
}

void to_hf_tensor(const ParamLayout& layout, const HfTensor& t, const float* params, float* out) {
  const float* src = params + layout.at(t.name).offset;
  if (!t.transposed) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    std::memcpy(out, src, n * sizeof(float));  // wte: the first vocab rows only
    return;
  }
  const auto rows = static_cast<size_t>(t.shape[0]), cols = static_cast<size_t>(t.shape[1]);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t o = 0; o < cols; ++o) out[i * cols + o] = src[o * rows + i];
  }
}

void from_hf_tensor(const ParamLayout& layout, const HfTensor& t, const float* in, float* params) {
  float* dst = params + layout.at(t.name).offset;
  if (!t.transposed) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    std::memcpy(dst, in, n * sizeof(float));  // wte: padding rows keep their value (zero)
    return;
  }
  const auto rows = static_cast<size_t>(t.shape[0]), cols = static_cast<size_t>(t.shape[1]);
  for (size_t i = 0; i < rows; ++i) {
    for (size_t o = 0; o < cols; ++o) dst[o * rows + i] = in[i * cols + o];
  }
}

}  // namespace railyard
