// AdamW and clipping against steps computed by hand from the PyTorch formulas.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "railyard/adamw.hpp"

namespace railyard {
namespace {

TEST(AdamW, FirstStepByHand) {
  AdamWParams hp;
  hp.beta1 = 0.9f;
  hp.beta2 = 0.99f;
  hp.eps = 1e-8f;
  hp.weight_decay = 0.5f;
  const float lr = 0.1f;
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, -0.25f}, m(2, 0.0f), v(2, 0.0f);
  adamw_update(p.data(), g.data(), m.data(), v.data(), 2, hp, lr, 1.0f, 1, true);
  // t = 1: mhat = g, vhat = g^2, so the step is lr * g / (|g| + eps) = lr * sign(g).
  // p = p (1 - lr wd) - lr sign(g): 1 * 0.95 - 0.1 = 0.85; -2 * 0.95 + 0.1 = -1.8.
  EXPECT_NEAR(p[0], 0.85f, 1e-6);
  EXPECT_NEAR(p[1], -1.8f, 1e-6);
  EXPECT_NEAR(m[0], 0.05f, 1e-7);
  EXPECT_NEAR(v[0], 0.01f * 0.25f, 1e-8);
}

TEST(AdamW, SecondStepWithoutDecayAndWithClipFactor) {
  AdamWParams hp;
  hp.beta1 = 0.8f;
  hp.beta2 = 0.9f;
  hp.eps = 1e-3f;
  hp.weight_decay = 10.0f;  // must be ignored: decay = false
  std::vector<float> p = {0.3f}, m = {0.2f}, v = {0.05f}, g = {4.0f};
  const float lr = 0.01f, k = 0.25f;
  adamw_update(p.data(), g.data(), m.data(), v.data(), 1, hp, lr, k, 2, false);
  const double gk = 4.0 * 0.25;
  const double m2 = 0.8 * 0.2 + 0.2 * gk, v2 = 0.9 * 0.05 + 0.1 * gk * gk;
  const double mhat = m2 / (1 - 0.8 * 0.8), vhat = v2 / (1 - 0.9 * 0.9);
  EXPECT_NEAR(m[0], m2, 1e-7);
  EXPECT_NEAR(v[0], v2, 1e-7);
  EXPECT_NEAR(p[0], 0.3 - lr * mhat / (std::sqrt(vhat) + 1e-3), 1e-6);
}

TEST(AdamW, StepOverLayoutDecaysOnlyDecayTensors) {
  ParamLayout layout;
  layout.add("w", {2, 2}, true);
  layout.add("b", {3}, false);
  std::vector<float> p(layout.total(), 1.0f), g(layout.total(), 0.0f), m(layout.total(), 0.0f),
      v(layout.total(), 0.0f);
  AdamWParams hp;
  hp.weight_decay = 0.1f;
  adamw_step(layout, p.data(), g.data(), m.data(), v.data(), hp, 0.5f, 1.0f, 1);
  // Zero gradient: only decay moves a parameter, p *= 1 - 0.5 * 0.1.
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(p[i], 0.95f);
  const size_t b = layout.at("b").offset;
  for (size_t i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(p[b + i], 1.0f);
  // Alignment padding is never written.
  for (size_t i = 4; i < b; ++i) EXPECT_FLOAT_EQ(p[i], 1.0f);
}

TEST(AdamW, RejectsStepZero) {
  float p = 0, g = 0, m = 0, v = 0;
  EXPECT_THROW(adamw_update(&p, &g, &m, &v, 1, AdamWParams{}, 0.1f, 1.0f, 0, true),
               std::invalid_argument);
}

TEST(Clip, GlobalNormAndFactor) {
  std::vector<float> g = {3.0f, 0.0f, -4.0f};
  EXPECT_DOUBLE_EQ(global_norm(g.data(), g.size()), 5.0);
  EXPECT_FLOAT_EQ(clip_factor(5.0, 1.0f), static_cast<float>(1.0 / (5.0 + 1e-6)));
  EXPECT_FLOAT_EQ(clip_factor(0.5, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(clip_factor(50.0, 0.0f), 1.0f);  // clip <= 0 disables
  // The norm accumulates in double: a float sum of 2^20 equal squares drifts by ~1e-4 relative.
  std::vector<float> small(1 << 20, 1e-3f);
  EXPECT_NEAR(global_norm(small.data(), small.size()), 1024.0 * static_cast<double>(1e-3f), 1e-10);
}

}  // namespace
}  // namespace railyard
