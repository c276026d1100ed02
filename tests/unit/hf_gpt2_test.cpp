// The safetensors container (round trip, hostile headers), the transformers GPT-2 mapping
// (names, shapes, Conv1D orientation, vocabulary cut and padding), config.json checks, the
// logits of GptCpu and the sampler.
#include "railyard/hf_gpt2.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "railyard/gpt_cpu.hpp"
#include "railyard/safetensors.hpp"
#include "railyard/sampler.hpp"

namespace railyard {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("railyard_hf_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
           name))
      .string();
}

// A safetensors file's bytes from a header JSON and `data_bytes` of data.
std::string safetensors_bytes(const std::string& json, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(json.size() >> (8 * i));
  return out + json + std::string(data_bytes, '\0');
}

void expect_refused(const std::string& json, size_t data_bytes, const std::string& needle) {
  const std::string f = safetensors_bytes(json, data_bytes);
  try {
    parse_safetensors_header(f, f.size());
    ADD_FAILURE() << "accepted " << json;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Safetensors, WriteReadRoundTrip) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-1.5f};
  const std::string p = temp_path("rt.safetensors");
  fs::remove(p);
  write_safetensors(p, {{"a", {2, 3}, a.data()}, {"b.bias", {1}, b.data()}}, {{"format", "pt"}});
  EXPECT_EQ(fs::status(p).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  SafetensorsReader r(p);
  EXPECT_EQ(r.header().metadata.at("format"), "pt");
  EXPECT_EQ(r.header().data_start % 8, 0u);
  ASSERT_EQ(r.header().tensors.size(), 2u);
  const SafetensorsEntry* e = r.header().find("a");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> got;
  r.read_f32(*e, got);
  EXPECT_EQ(got, a);
  r.read_f32(*r.header().find("b.bias"), got);
  EXPECT_EQ(got, b);
  fs::remove(p);
}

TEST(Safetensors, WidensHalfPrecisionExactly) {
  // 1.0, -2.5, the smallest subnormal, 65504 (largest half), +inf; bf16 1.0 and -0.15625.
  const std::vector<uint16_t> f16 = {0x3c00, 0xc100, 0x0001, 0x7bff, 0x7c00};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xbe20};
  std::string json = R"({"h": {"dtype": "F16", "shape": [5], "data_offsets": [0, 10]},)"
                     R"( "b": {"dtype": "BF16", "shape": [2], "data_offsets": [10, 14]}})";
  std::string bytes = safetensors_bytes(json, 0);
  bytes.append(reinterpret_cast<const char*>(f16.data()), 10);
  bytes.append(reinterpret_cast<const char*>(bf16.data()), 4);
  const std::string p = temp_path("half.safetensors");
  std::ofstream(p, std::ios::binary) << bytes;
  SafetensorsReader r(p);
  std::vector<float> got;
  r.read_f32(*r.header().find("h"), got);
  EXPECT_EQ(got, (std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -24), 65504.0f,
                                     std::numeric_limits<float>::infinity()}));
  r.read_f32(*r.header().find("b"), got);
  EXPECT_EQ(got, (std::vector<float>{1.0f, -0.15625f}));
  fs::remove(p);
}

TEST(Safetensors, RefusesHostileHeaders) {
  const std::string t = R"("t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  EXPECT_NO_THROW(parse_safetensors_header(safetensors_bytes("{" + t + "}", 8), 16 + t.size() + 2));
  expect_refused("{" + t + "}", 4, "larger than the file's data (4 bytes)");
  expect_refused("{" + t + "}", 12, "cover 8 bytes");  // a hole at the end
  expect_refused("[1, 2]", 0, "not a JSON object");
  expect_refused("{\"t\": ", 0, "not a JSON object");
  expect_refused(R"({"t": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}})", 8,
                 "unknown dtype 'F33'");
  expect_refused(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 16,
                 "need 12 bytes");
  expect_refused(R"({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8,
                 "shape entry");
  expect_refused(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8, "outside");
  expect_refused(
      R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", 8,
      "larger than the file");
  expect_refused(
      R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "u": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
      12, "overlap or hole");
  expect_refused(R"({"__metadata__": {"a": 1}})", 0, "not a string");
  std::string huge(8, '\xff');
  EXPECT_THROW(parse_safetensors_header(huge + "{}", 10), std::invalid_argument);
  EXPECT_THROW(parse_safetensors_header("abc", 3), std::invalid_argument);
}

GptConfig tiny() {
  GptConfig c;
  c.vocab = 300;
  c.padded_vocab = padded_vocab_for(300);
  c.max_seq = 8;
  c.layers = 2;
  c.heads = 2;
  c.dim = 8;
  return c;
}

TEST(HfGpt2, NamesShapesAndOrientation) {
  const GptConfig c = tiny();
  EXPECT_EQ(c.padded_vocab, 384);
  const std::vector<HfTensor> map = hf_gpt2_tensors(c);
  ASSERT_EQ(map.size(), 2 + 12 * 2 + 2u);
  EXPECT_EQ(map[0].hf_name, "transformer.wte.weight");
  EXPECT_EQ(map[0].shape, (std::vector<int64_t>{300, 8}));
  const ParamLayout layout = gpt_param_layout(c);
  std::vector<float> params(layout.total());
  for (size_t i = 0; i < params.size(); ++i) params[i] = static_cast<float>(i % 1009) * 0.5f;
  const TensorSpec& wte = layout.at("wte");
  std::fill(params.begin() + static_cast<long>(wte.offset + 300 * 8),
            params.begin() + static_cast<long>(wte.offset + wte.numel), 0.0f);  // padding rows
  std::vector<float> back(layout.total(), 0.0f);
  for (const HfTensor& t : map) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(d);
    std::vector<float> buf(n);
    to_hf_tensor(layout, t, params.data(), buf.data());
    if (t.hf_name == "transformer.h.1.attn.c_attn.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{8, 24}));
      const size_t qkv = layout.at("h.1.attn.qkv.weight").offset;
      EXPECT_EQ(buf[2 * 24 + 17], params[qkv + 17 * 8 + 2]);  // [in 2, out 17] = [out 17, in 2]
    }
    if (t.hf_name == "transformer.h.0.mlp.c_proj.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{32, 8}));
    }
    from_hf_tensor(layout, t, buf.data(), back.data());
  }
  // Alignment gaps between tensors are not parameters; compare the tensors only.
  for (const TensorSpec& t : layout.tensors()) {
    for (size_t i = t.offset; i < t.offset + t.numel; ++i) ASSERT_EQ(back[i], params[i]) << t.name;
  }
}

TEST(HfGpt2, ConfigRoundTripAndRefusals) {
  const GptConfig c = tiny();
  const HfGpt2Config h = parse_hf_gpt2_config(hf_gpt2_config_json(c));
  EXPECT_EQ(h.vocab_size, 300);
  EXPECT_EQ(h.n_positions, 8);
  const GptConfig back = gpt_config_from_hf(h);
  EXPECT_EQ(back.padded_vocab, 384);
  EXPECT_EQ(back.dim, 8);
  EXPECT_EQ(back.layers, 2);
  auto refused = [&](const std::string& key, const nlohmann::json& value,
                     const std::string& needle) {
    nlohmann::json j = nlohmann::json::parse(hf_gpt2_config_json(c));
    if (value.is_discarded()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
    try {
      parse_hf_gpt2_config(j.dump());
      ADD_FAILURE() << key << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const nlohmann::json absent(nlohmann::json::value_t::discarded);
  refused("model_type", "llama", "model_type is \"llama\"");
  refused("model_type", absent, "has no model_type");
  refused("activation_function", "gelu", "activation_function is 'gelu'");
  refused("layer_norm_epsilon", 1e-6, "layer_norm_epsilon is 1e-06");
  refused("n_inner", 7, "n_inner is 7, railyard's MLP is 4 x n_embd = 32");
  refused("tie_word_embeddings", false, "tie_word_embeddings is false");
  refused("scale_attn_by_inverse_layer_idx", true, "scale_attn_by_inverse_layer_idx");
  refused("n_head", 3, "n_head 3 does not divide n_embd 8");
  refused("n_embd", -1, "n_embd is -1");
  refused("vocab_size", absent, "has no vocab_size");
  EXPECT_THROW(parse_hf_gpt2_config("{"), std::invalid_argument);
}

TEST(GptCpuLogits, SoftmaxOfLogitsGivesTheForwardLoss) {
  const GptConfig c = tiny();
  GptCpu<float> m(c, 1, 8);
  std::vector<float> params(m.layout().total());
  gpt_init_params(c, m.layout(), 7, params.data());
  const std::vector<int32_t> tok = {1, 299, 5, 7, 0, 100, 42, 3},
                             tgt = {299, 5, 7, 0, 100, 42, 3, 9};
  const float loss = m.forward(params.data(), tok, tgt, 1, 8);
  const std::span<const float> z = m.logits(params.data(), tok, 1, 8);
  ASSERT_EQ(z.size(), 8u * 384);
  double sum = 0;
  for (int t = 0; t < 8; ++t) {
    const float* row = z.data() + t * 384;
    for (int v = 300; v < 384; ++v) EXPECT_EQ(row[v], 0.0f);  // padding rows are zero
    double mx = row[0], s = 0;
    for (int v = 0; v < 300; ++v) mx = std::max(mx, double(row[v]));
    for (int v = 0; v < 300; ++v) s += std::exp(row[v] - mx);
    sum += std::log(s) + mx - row[tgt[t]];
  }
  EXPECT_NEAR(sum / 8, loss, 1e-5);
}

TEST(Sampler, GreedyTopKAndDeterminism) {
  const std::vector<float> z = {0.1f, 2.0f, 2.0f, -1.0f};
  SampleOptions greedy;
  greedy.temperature = 0;
  EXPECT_EQ(pick_token(z, greedy, 0), 1);  // ties: the lower id
  SampleOptions top1;
  top1.top_k = 1;
  for (uint64_t bits : {0ull, ~0ull, 0x1234567ull << 20}) EXPECT_EQ(pick_token(z, top1, bits), 1);
  SampleOptions top2;
  top2.top_k = 2;
  EXPECT_EQ(pick_token(z, top2, 0), 1);
  EXPECT_EQ(pick_token(z, top2, ~0ull), 2);  // never 0 or 3
  const GptConfig c = tiny();
  std::vector<float> params(gpt_param_layout(c).total());
  gpt_init_params(c, gpt_param_layout(c), 3, params.data());
  SampleOptions o;
  o.tokens = 12;  // longer than max_seq 8: the context slides
  o.seed = 5;
  const std::vector<int32_t> prompt = {1, 2};
  const auto a = sample_gpt(c, params, prompt, o), b = sample_gpt(c, params, prompt, o);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 12u);
  for (int32_t t : a) EXPECT_TRUE(t >= 0 && t < 300);
  o.seed = 6;
  EXPECT_NE(sample_gpt(c, params, prompt, o), a);
  EXPECT_THROW(sample_gpt(c, params, std::vector<int32_t>{}, o), std::invalid_argument);
}

}  // namespace
}  // namespace railyard
