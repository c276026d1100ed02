// GptConfig validation, the parameter layout it defines, FLOPs and GPT-2 initialisation.

#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "railyard/gpt_config.hpp"

namespace railyard {
namespace {

GptConfig small_config() {
  GptConfig cfg;
  cfg.vocab = 100;
  cfg.padded_vocab = 128;
  cfg.max_seq = 32;
  cfg.layers = 3;
  cfg.heads = 4;
  cfg.dim = 64;
  return cfg;
}

std::string validation_error(const GptConfig& cfg) {
  try {
    cfg.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(GptConfig, ValidateNamesTheField) {
  EXPECT_EQ(validation_error(small_config()), "");
  for (const char* field : {"vocab", "padded_vocab", "max_seq", "layers", "heads", "dim"}) {
    GptConfig cfg = small_config();
    const std::string f = field;
    int* value = f == "vocab"          ? &cfg.vocab
                 : f == "padded_vocab" ? &cfg.padded_vocab
                 : f == "max_seq"      ? &cfg.max_seq
                 : f == "layers"       ? &cfg.layers
                 : f == "heads"        ? &cfg.heads
                                       : &cfg.dim;
    for (int bad : {0, -3}) {
      *value = bad;
      const std::string msg = validation_error(cfg);
      EXPECT_NE(msg.find(f + " must be positive"), std::string::npos) << msg;
    }
  }
  GptConfig cfg = small_config();
  cfg.padded_vocab = 99;
  EXPECT_NE(validation_error(cfg).find("padded_vocab (99) must be at least vocab (100)"),
            std::string::npos);
  cfg = small_config();
  cfg.heads = 5;
  EXPECT_NE(validation_error(cfg).find("heads (5) must divide dim (64)"), std::string::npos);
}

TEST(GptConfig, LayoutOrderShapesAndDecay) {
  const GptConfig cfg = small_config();
  const ParamLayout layout = gpt_param_layout(cfg);
  const auto& t = layout.tensors();
  ASSERT_EQ(t.size(), 2u + 12u * cfg.layers + 2u);
  EXPECT_EQ(t[0].name, "wte");
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(t[1].name, "wpe");
  EXPECT_EQ(t[1].shape, (std::vector<int64_t>{32, 64}));
  const std::vector<std::string> per_layer = {
      "ln1.weight",       "ln1.bias",       "attn.qkv.weight", "attn.qkv.bias",
      "attn.proj.weight", "attn.proj.bias", "ln2.weight",      "ln2.bias",
      "mlp.fc.weight",    "mlp.fc.bias",    "mlp.proj.weight", "mlp.proj.bias"};
  for (int l = 0; l < cfg.layers; ++l) {
    for (size_t k = 0; k < per_layer.size(); ++k) {
      EXPECT_EQ(t[2 + 12 * l + k].name, "h." + std::to_string(l) + "." + per_layer[k]);
    }
  }
  EXPECT_EQ(layout.at("h.1.attn.qkv.weight").shape, (std::vector<int64_t>{192, 64}));
  EXPECT_EQ(layout.at("h.1.mlp.fc.weight").shape, (std::vector<int64_t>{256, 64}));
  EXPECT_EQ(layout.at("h.1.mlp.proj.weight").shape, (std::vector<int64_t>{64, 256}));
  EXPECT_EQ(t.back().name, "lnf.bias");
  for (const TensorSpec& s : t) {
    EXPECT_EQ(s.decay, s.shape.size() == 2) << s.name;
    EXPECT_EQ(s.offset % ParamLayout::kAlign, 0u) << s.name;
  }
}

TEST(GptConfig, FlopsPerTokenOfGpt2Small) {
  GptConfig cfg;
  cfg.vocab = 50257;
  cfg.padded_vocab = 50304;
  cfg.max_seq = 1024;
  cfg.layers = 12;
  cfg.heads = 12;
  cfg.dim = 768;
  // DESIGN.md: about 803 MFLOP per token at T=1024.
  EXPECT_NEAR(cfg.flops_per_token(1024) / 1e6, 803.0, 2.0);
  EXPECT_GT(cfg.flops_per_token(1024), cfg.flops_per_token(512));
}

TEST(GptInit, Gpt2Statistics) {
  const GptConfig cfg = small_config();
  const ParamLayout layout = gpt_param_layout(cfg);
  std::vector<float> p(layout.total(), -7.0f);
  gpt_init_params(cfg, layout, 1234, p.data());
  auto stddev = [&](const TensorSpec& t, size_t n) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; ++i) {
      s += p[t.offset + i];
      s2 += static_cast<double>(p[t.offset + i]) * p[t.offset + i];
    }
    EXPECT_NEAR(s / n, 0.0, 0.002) << t.name;
    return std::sqrt(s2 / n);
  };
  const TensorSpec& wte = layout.at("wte");
  const size_t real = static_cast<size_t>(cfg.vocab) * cfg.dim;
  EXPECT_NEAR(stddev(wte, real), 0.02, 0.001);
  for (size_t i = real; i < wte.numel; ++i) ASSERT_EQ(p[wte.offset + i], 0.0f) << "padded row";
  EXPECT_NEAR(stddev(layout.at("h.0.mlp.fc.weight"), 256 * 64), 0.02, 0.001);
  const double resid = 0.02 / std::sqrt(2.0 * cfg.layers);
  EXPECT_NEAR(stddev(layout.at("h.2.mlp.proj.weight"), 256 * 64), resid, resid * 0.05);
  EXPECT_NEAR(stddev(layout.at("h.1.attn.proj.weight"), 64 * 64), resid, resid * 0.05);
  for (const char* name : {"h.0.ln1.weight", "h.2.ln2.weight", "lnf.weight"}) {
    const TensorSpec& t = layout.at(name);
    for (size_t i = 0; i < t.numel; ++i) ASSERT_EQ(p[t.offset + i], 1.0f) << name;
  }
  for (const char* name : {"h.0.attn.qkv.bias", "h.1.mlp.fc.bias", "lnf.bias"}) {
    const TensorSpec& t = layout.at(name);
    for (size_t i = 0; i < t.numel; ++i) ASSERT_EQ(p[t.offset + i], 0.0f) << name;
  }
  // Alignment padding between tensors is zero, not left over.
  size_t end = 0;
  for (const TensorSpec& t : layout.tensors()) {
    for (size_t i = end; i < t.offset; ++i) ASSERT_EQ(p[i], 0.0f);
    end = t.offset + t.numel;
  }
}

TEST(GptInit, DeterministicInSeedAndIndependentOfDepth) {
  const GptConfig cfg = small_config();
  const ParamLayout layout = gpt_param_layout(cfg);
  std::vector<float> a(layout.total()), b(layout.total()), c(layout.total());
  gpt_init_params(cfg, layout, 7, a.data());
  gpt_init_params(cfg, layout, 7, b.data());
  gpt_init_params(cfg, layout, 8, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // A tensor's values depend on its name and the seed only: a deeper model starts with the
  // same embeddings and the same first-layer attention weights.
  GptConfig deeper = cfg;
  deeper.layers = 5;
  const ParamLayout dl = gpt_param_layout(deeper);
  std::vector<float> d(dl.total());
  gpt_init_params(deeper, dl, 7, d.data());
  for (const char* name : {"wte", "wpe", "h.0.attn.qkv.weight", "h.2.mlp.fc.weight"}) {
    const TensorSpec& s = layout.at(name);
    const TensorSpec& t = dl.at(name);
    for (size_t i = 0; i < s.numel; ++i) ASSERT_EQ(a[s.offset + i], d[t.offset + i]) << name;
  }
}

// Every field of GptConfig is listed once: a field added to the struct but not to the list
// would be missing from checkpoints and exports.
TEST(GptConfigFields, ListEveryFieldOnce) {
  static_assert(sizeof(GptConfig) == std::size(kGptConfigFields) * sizeof(int));
  GptConfig c;
  std::set<std::string> names;
  int value = 100;
  for (const GptConfigField& f : kGptConfigFields) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    c.*f.member = ++value;
  }
  EXPECT_EQ(c.vocab, 101);
  EXPECT_EQ(c.dim, 106);
  EXPECT_EQ(std::set<int>({c.vocab, c.padded_vocab, c.max_seq, c.layers, c.heads, c.dim}).size(),
            6u);
}

}  // namespace
}  // namespace railyard
