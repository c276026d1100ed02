// The whole GPT's backward against central finite differences of its loss, in double, for
// every parameter of a tiny model; plus the model's input checks and float/double agreement.

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "grad_check.hpp"
#include "railyard/gpt_cpu.hpp"

namespace railyard {
namespace {

GptConfig tiny_config() {
  GptConfig cfg;
  cfg.vocab = 7;
  cfg.padded_vocab = 8;
  cfg.max_seq = 6;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.dim = 8;
  return cfg;
}

// GPT-2 init is nearly linear (std 0.02); random parameters of order 1 exercise every
// non-linearity. Padded wte rows stay zero, as after init.
std::vector<double> random_params(const GptConfig& cfg, const ParamLayout& layout) {
  std::vector<double> p = test::random_vector(layout.total(), 42, -0.6, 0.6);
  const TensorSpec& wte = layout.at("wte");
  for (size_t i = static_cast<size_t>(cfg.vocab) * cfg.dim; i < wte.numel; ++i)
    p[wte.offset + i] = 0;
  for (const TensorSpec& t : layout.tensors()) {
    if (t.shape.size() == 1 && t.name.ends_with(".weight")) {
      for (size_t i = 0; i < t.numel; ++i) p[t.offset + i] += 1.0;
    }
  }
  return p;
}

const std::vector<int32_t> kTokens = {1, 3, 6, 0, 2, 5, 5, 4, 1, 0};
const std::vector<int32_t> kTargets = {3, 6, -1, 2, 5, 5, 4, 1, 0, 6};  // one ignored position

TEST(GptModelGrad, EveryParameterMatchesFiniteDifferences) {
  const GptConfig cfg = tiny_config();
  GptCpu<double> model(cfg, 2, 5);
  std::vector<double> params = random_params(cfg, model.layout());
  const double scale = 1.7;  // backward computes the gradient of scale * loss
  model.forward(params.data(), kTokens, kTargets, 2, 5);
  std::vector<double> grads(params.size(), 0.0);
  model.backward(params.data(), grads.data(), scale);

  auto loss = [&] { return scale * model.forward(params.data(), kTokens, kTargets, 2, 5); };
  for (const TensorSpec& t : model.layout().tensors()) {
    std::vector<double> x(params.begin() + t.offset, params.begin() + t.offset + t.numel);
    std::vector<double> g(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
    auto tensor_loss = [&] {
      std::copy(x.begin(), x.end(), params.begin() + t.offset);
      return loss();
    };
    test::expect_gradient(t.name.c_str(), x, g, tensor_loss);
    std::copy(x.begin(), x.end(), params.begin() + t.offset);
  }
  // Padded vocabulary rows never get a gradient, so they stay zero under AdamW.
  const TensorSpec& wte = model.layout().at("wte");
  for (size_t i = static_cast<size_t>(cfg.vocab) * cfg.dim; i < wte.numel; ++i) {
    EXPECT_EQ(grads[wte.offset + i], 0.0);
  }
}

TEST(GptModelGrad, BackwardAccumulates) {
  const GptConfig cfg = tiny_config();
  GptCpu<double> model(cfg, 2, 5);
  std::vector<double> params = random_params(cfg, model.layout());
  std::vector<double> once(params.size(), 0.0), twice(params.size(), 0.0);
  model.forward(params.data(), kTokens, kTargets, 2, 5);
  model.backward(params.data(), once.data(), 1.0);
  for (int k = 0; k < 2; ++k) {
    model.forward(params.data(), kTokens, kTargets, 2, 5);
    model.backward(params.data(), twice.data(), 1.0);
  }
  for (size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(twice[i], 2 * once[i], 1e-12);
  EXPECT_THROW(model.backward(params.data(), twice.data(), 1.0), std::logic_error);
}

TEST(GptModel, SmallerBatchInTheSameBuffersAndFloatAgrees) {
  const GptConfig cfg = tiny_config();
  GptCpu<double> big(cfg, 2, 5);
  GptCpu<double> small(cfg, 1, 3);
  std::vector<double> params = random_params(cfg, big.layout());
  const std::vector<int32_t> tok = {1, 3, 6}, tgt = {3, 6, 0};
  const double a = big.forward(params.data(), tok, tgt, 1, 3);
  const double b = small.forward(params.data(), tok, tgt, 1, 3);
  EXPECT_EQ(a, b);

  GptCpu<float> f(cfg, 2, 5);
  std::vector<float> pf(params.begin(), params.end());
  EXPECT_NEAR(f.forward(pf.data(), kTokens, kTargets, 2, 5),
              big.forward(params.data(), kTokens, kTargets, 2, 5), 1e-5);
}

TEST(GptModel, AllIgnoredTargetsGiveZeroLossAndNoGradient) {
  const GptConfig cfg = tiny_config();
  GptCpu<double> model(cfg, 1, 3);
  std::vector<double> params = random_params(cfg, model.layout());
  const std::vector<int32_t> tok = {1, 2, 3}, tgt = {-1, -1, -1};
  EXPECT_EQ(model.forward(params.data(), tok, tgt, 1, 3), 0.0);
  std::vector<double> grads(params.size(), 0.0);
  model.backward(params.data(), grads.data(), 1.0);
  for (double g : grads) EXPECT_EQ(g, 0.0);
}

TEST(GptModel, RejectsBadInput) {
  const GptConfig cfg = tiny_config();
  EXPECT_THROW(GptCpu<float>(cfg, 0, 4), std::invalid_argument);
  EXPECT_THROW(GptCpu<float>(cfg, 1, cfg.max_seq + 1), std::invalid_argument);
  GptCpu<float> model(cfg, 1, 3);
  std::vector<float> params(model.layout().total(), 0.0f);
  const std::vector<int32_t> ok = {1, 2, 3};
  EXPECT_THROW(model.forward(params.data(), std::vector<int32_t>{1, 7, 3}, ok, 1, 3),
               std::invalid_argument);  // token == vocab (a padded row)
  EXPECT_THROW(model.forward(params.data(), ok, std::vector<int32_t>{1, 2, 7}, 1, 3),
               std::invalid_argument);
  EXPECT_THROW(model.forward(params.data(), std::vector<int32_t>{-2, 1, 2}, ok, 1, 3),
               std::invalid_argument);
  EXPECT_THROW(model.forward(params.data(), ok, ok, 2, 3), std::invalid_argument);  // > allocation
  EXPECT_THROW(model.forward(params.data(), ok, ok, 1, 2), std::invalid_argument);  // size mismatch
  try {
    model.forward(params.data(), std::vector<int32_t>{1, 9, 3}, ok, 1, 3);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("token 9 at position 1"), std::string::npos) << e.what();
  }
}

TEST(GptModel, ZeroParametersPredictUniformly) {
  // With every weight zero the logits are all zero: the loss is exactly ln(vocab), padded
  // columns excluded.
  const GptConfig cfg = tiny_config();
  GptCpu<double> model(cfg, 2, 5);
  std::vector<double> params(model.layout().total(), 0.0);
  EXPECT_NEAR(model.forward(params.data(), kTokens, kTargets, 2, 5), std::log(7.0), 1e-12);
}

}  // namespace
}  // namespace railyard
