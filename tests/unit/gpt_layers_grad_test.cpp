// Every layer's backward against central finite differences of its forward, in double.
// Each check uses the scalar loss L = sum(out * R) for a fixed random R, so dout = R.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.hpp"
#include "railyard/cpu_kernels.hpp"

namespace railyard {
namespace {

using test::dot;
using test::expect_gradient;
using test::random_vector;
using Vec = std::vector<double>;

TEST(GradCheck, DetectsAWrongGradient) {
  // The checker itself must be able to fail: d/dx sum(x^2) = 2x, offered 2x + 1e-3.
  Vec x = random_vector(5, 1);
  Vec wrong(5);
  for (size_t i = 0; i < x.size(); ++i) wrong[i] = 2 * x[i] + 1e-3;
  auto loss = [&] { return dot(x, x); };
  EXPECT_NE(test::first_mismatch(x, wrong, loss, nullptr), -1);
  Vec right(5);
  for (size_t i = 0; i < x.size(); ++i) right[i] = 2 * x[i];
  EXPECT_EQ(test::first_mismatch(x, right, loss, nullptr), -1);
}

TEST(LayerGrad, Encoder) {
  const int B = 2, T = 3, C = 4, V = 5;
  std::vector<int32_t> tokens = {1, 4, 1, 0, 3, 4};
  Vec wte = random_vector(V * C, 2), wpe = random_vector(T * C, 3), r = random_vector(B * T * C, 4);
  Vec out(B * T * C);
  auto loss = [&] {
    cpu::encoder_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, r);
  };
  Vec dwte(wte.size(), 0.0), dwpe(wpe.size(), 0.0);
  cpu::encoder_backward(dwte.data(), dwpe.data(), r.data(), tokens.data(), B, T, C);
  expect_gradient("encoder wte", wte, dwte, loss);
  expect_gradient("encoder wpe", wpe, dwpe, loss);
}

TEST(LayerGrad, LayerNorm) {
  const int N = 3, C = 6;
  Vec x = random_vector(N * C, 5, -2, 2), w = random_vector(C, 6, 0.5, 1.5),
      b = random_vector(C, 7);
  Vec r = random_vector(N * C, 8), out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                           C);
    return dot(out, r);
  };
  loss();
  Vec dx(x.size(), 0.0), dw(C, 0.0), db(C, 0.0);
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(),
                          mean.data(), rstd.data(), N, C);
  expect_gradient("layernorm inp", x, dx, loss);
  expect_gradient("layernorm weight", w, dw, loss);
  expect_gradient("layernorm bias", b, db, loss);
  // The normalised rows have mean 0 and variance ~1 before the affine part.
  Vec ones(C, 1.0), zeros(C, 0.0);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), ones.data(), zeros.data(),
                         N, C);
  double m = 0, v = 0;
  for (int c = 0; c < C; ++c) m += out[c];
  for (int c = 0; c < C; ++c) v += out[c] * out[c];
  EXPECT_NEAR(m / C, 0.0, 1e-12);
  EXPECT_NEAR(v / C, 1.0, 1e-3);
}

TEST(LayerGrad, MatmulWithAndWithoutBias) {
  const int N = 4, IC = 5, OC = 3;
  Vec x = random_vector(N * IC, 9), w = random_vector(OC * IC, 10), bias = random_vector(OC, 11);
  Vec r = random_vector(N * OC, 12), out(N * OC);
  for (bool with_bias : {true, false}) {
    auto loss = [&] {
      cpu::matmul_forward(out.data(), x.data(), w.data(), with_bias ? bias.data() : nullptr, N, IC,
                          OC);
      return dot(out, r);
    };
    Vec dx(x.size(), 0.0), dw(w.size(), 0.0), db(OC, 0.0);
    cpu::matmul_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, r.data(), x.data(),
                         w.data(), N, IC, OC);
    expect_gradient("matmul inp", x, dx, loss);
    expect_gradient("matmul weight", w, dw, loss);
    if (with_bias) expect_gradient("matmul bias", bias, db, loss);
  }
  // out = x W^T + b, with W stored [OC, IC]: check one element by hand.
  cpu::matmul_forward(out.data(), x.data(), w.data(), bias.data(), N, IC, OC);
  double expect = bias[2];
  for (int k = 0; k < IC; ++k) expect += x[1 * IC + k] * w[2 * IC + k];
  EXPECT_NEAR(out[1 * OC + 2], expect, 1e-12);
}

TEST(LayerGrad, MatmulBackwardAccumulates) {
  const int N = 2, IC = 3, OC = 2;
  Vec x = random_vector(N * IC, 13), w = random_vector(OC * IC, 14), r = random_vector(N * OC, 15);
  Vec dx1(x.size(), 0.0), dw1(w.size(), 0.0), db1(OC, 0.0);
  cpu::matmul_backward(dx1.data(), dw1.data(), db1.data(), r.data(), x.data(), w.data(), N, IC, OC);
  Vec dx2 = dx1, dw2 = dw1, db2 = db1;
  cpu::matmul_backward(dx2.data(), dw2.data(), db2.data(), r.data(), x.data(), w.data(), N, IC, OC);
  for (size_t i = 0; i < dw1.size(); ++i) EXPECT_NEAR(dw2[i], 2 * dw1[i], 1e-12);
  for (size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx2[i], 2 * dx1[i], 1e-12);
  for (size_t i = 0; i < db1.size(); ++i) EXPECT_NEAR(db2[i], 2 * db1[i], 1e-12);
}

TEST(LayerGrad, CausalAttention) {
  const int B = 2, T = 5, C = 8, H = 2;
  Vec qkv = random_vector(B * T * 3 * C, 16, -1.5, 1.5), r = random_vector(B * T * C, 17);
  Vec out(B * T * C), att(B * H * T * T);
  auto loss = [&] {
    cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
    return dot(out, r);
  };
  loss();
  Vec dqkv(qkv.size(), 0.0);
  cpu::attention_backward(dqkv.data(), r.data(), qkv.data(), att.data(), B, T, C, H);
  expect_gradient("attention qkv", qkv, dqkv, loss);

  // Rows of att are distributions over the past only.
  for (int bh = 0; bh < B * H; ++bh) {
    for (int i = 0; i < T; ++i) {
      double s = 0;
      for (int j = 0; j < T; ++j) {
        const double a = att[(bh * T + i) * T + j];
        if (j > i) {
          EXPECT_EQ(a, 0.0);
        }
        s += a;
      }
      EXPECT_NEAR(s, 1.0, 1e-12);
    }
  }
  // Causality: changing the last position's k and v leaves earlier outputs unchanged.
  Vec before = out;
  for (int c = C; c < 3 * C; ++c) qkv[(T - 1) * 3 * C + c] += 0.5;
  loss();
  for (int t = 0; t < T - 1; ++t) {
    for (int c = 0; c < C; ++c) EXPECT_EQ(out[t * C + c], before[t * C + c]) << "t=" << t;
  }
}

TEST(LayerGrad, CausalAttentionAcrossRowBlocks) {
  // Longer than one block of query rows (64), so the blocked products are checked too.
  const int B = 1, T = 70, C = 4, H = 2;
  Vec qkv = random_vector(B * T * 3 * C, 26, -1.0, 1.0), r = random_vector(B * T * C, 27);
  Vec out(B * T * C), att(B * H * T * T);
  auto loss = [&] {
    cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
    return dot(out, r);
  };
  loss();
  Vec dqkv(qkv.size(), 0.0);
  cpu::attention_backward(dqkv.data(), r.data(), qkv.data(), att.data(), B, T, C, H);
  expect_gradient("attention qkv, T=70", qkv, dqkv, loss);
  for (int i = 0; i < T; ++i) {
    for (int j = i + 1; j < T; ++j) ASSERT_EQ(att[i * T + j], 0.0);
  }
}

TEST(LayerGrad, Gelu) {
  const int n = 11;
  Vec x = random_vector(n, 18, -4, 4), r = random_vector(n, 19), out(n);
  auto loss = [&] {
    cpu::gelu_forward(out.data(), x.data(), n);
    return dot(out, r);
  };
  Vec dx(n, 0.0);
  cpu::gelu_backward(dx.data(), x.data(), r.data(), n);
  expect_gradient("gelu", x, dx, loss);
  // The tanh approximation at a known point: gelu(1) = 0.841192 (GPT-2's formula).
  double one = 1.0, y = 0;
  cpu::gelu_forward(&y, &one, 1);
  EXPECT_NEAR(y, 0.8411919906082768, 1e-12);
}

TEST(LayerGrad, Residual) {
  const int n = 7;
  Vec a = random_vector(n, 20), b = random_vector(n, 21), r = random_vector(n, 22), out(n);
  auto loss = [&] {
    cpu::residual_forward(out.data(), a.data(), b.data(), n);
    return dot(out, r);
  };
  Vec da(n, 0.0), db(n, 0.0);
  cpu::residual_backward(da.data(), db.data(), r.data(), n);
  expect_gradient("residual a", a, da, loss);
  expect_gradient("residual b", b, db, loss);
}

TEST(LayerGrad, SoftmaxCrossEntropyWithPaddingAndIgnoredTargets) {
  const int N = 4, V = 5, Vp = 8;
  std::vector<int32_t> targets = {2, -1, 0, 4};
  Vec logits = random_vector(N * Vp, 23, -3, 3), r = random_vector(N, 24, 0.5, 1.5);
  // Padded logits are large: they must still never receive probability.
  for (int i = 0; i < N; ++i) {
    for (int v = V; v < Vp; ++v) logits[i * Vp + v] = 50.0;
  }
  Vec probs(N * Vp), losses(N);
  int counted = 0;
  auto loss = [&] {
    counted = cpu::softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(),
                                                targets.data(), N, V, Vp);
    return dot(losses, r);
  };
  loss();
  EXPECT_EQ(counted, 3);
  EXPECT_EQ(losses[1], 0.0);
  for (int i = 0; i < N; ++i) {
    double s = 0;
    for (int v = 0; v < Vp; ++v) {
      if (v >= V) {
        EXPECT_EQ(probs[i * Vp + v], 0.0);
      }
      s += probs[i * Vp + v];
    }
    EXPECT_NEAR(s, 1.0, 1e-12);
    if (targets[i] >= 0) {
      EXPECT_NEAR(losses[i], -std::log(probs[i * Vp + targets[i]]), 1e-12);
    }
  }
  Vec dlogits(N * Vp);
  cpu::softmax_crossentropy_backward(dlogits.data(), probs.data(), r.data(), targets.data(), N, V,
                                     Vp);
  expect_gradient("softmax cross-entropy logits", logits, dlogits, loss);
  for (int v = 0; v < Vp; ++v) EXPECT_EQ(dlogits[1 * Vp + v], 0.0);

  // In place (dlogits aliasing probs), as the model uses it.
  loss();
  Vec inplace = probs;
  cpu::softmax_crossentropy_backward(inplace.data(), inplace.data(), r.data(), targets.data(), N, V,
                                     Vp);
  for (size_t i = 0; i < inplace.size(); ++i) EXPECT_EQ(inplace[i], dlogits[i]);
}

TEST(LayerGrad, FloatGeluMatchesDouble) {
  // The float path computes tanh its own way; it must agree with std::tanh's double result to
  // float precision over the whole range, including near 0 and the switch at |arg| = 0.3.
  const int n = 4001;
  Vec x(n);
  for (int i = 0; i < n; ++i) x[i] = -10.0 + 0.005 * i;
  for (double s : {0.2999, 0.3, 0.3001}) x.push_back(s / 0.7978845608028654);
  Vec y(x.size()), dy(x.size(), 0.0), ones(x.size(), 1.0);
  cpu::gelu_forward(y.data(), x.data(), static_cast<int64_t>(x.size()));
  cpu::gelu_backward(dy.data(), x.data(), ones.data(), static_cast<int64_t>(x.size()));
  std::vector<float> xf(x.begin(), x.end()), yf(x.size()), dyf(x.size(), 0.0f),
      onesf(x.size(), 1.0f);
  cpu::gelu_forward(yf.data(), xf.data(), static_cast<int64_t>(x.size()));
  cpu::gelu_backward(dyf.data(), xf.data(), onesf.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    // Compared at the float input, so only the kernels' own error counts.
    const double xi = xf[i];
    double yr = 0, dyr = 0, one = 1.0;
    cpu::gelu_forward(&yr, &xi, 1);
    cpu::gelu_backward(&dyr, &xi, &one, 1);
    ASSERT_NEAR(yf[i], yr, 4e-7 * std::max(1.0, std::abs(yr))) << "x=" << xi;
    // The derivative's tail (x < -4) cancels two terms near 1e-6 in float whatever tanh is
    // used (tanhf itself is off by 2e-6 at x = -5), hence the wider bound.
    ASSERT_NEAR(dyf[i], dyr, 3e-6 * std::max(1.0, std::abs(dyr))) << "x=" << xi;
  }
  // A diverged model's NaN stays NaN; huge inputs saturate.
  const float special[] = {std::nanf(""), 1e30f, -1e30f};
  float out[3], grad[3] = {0, 0, 0}, one[3] = {1, 1, 1};
  cpu::gelu_forward(out, special, 3);
  cpu::gelu_backward(grad, special, one, 3);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(grad[0]));
  EXPECT_EQ(out[1], 1e30f);
  EXPECT_EQ(grad[1], 1.0f);
  EXPECT_EQ(grad[2], 0.0f);
}

TEST(LayerGrad, FloatMatchesDouble) {
  // The float instantiation (sgemm) computes the same attention as the double one.
  const int B = 1, T = 6, C = 8, H = 4;
  Vec qkv = random_vector(B * T * 3 * C, 25);
  Vec out(B * T * C), att(B * H * T * T);
  cpu::attention_forward(out.data(), att.data(), qkv.data(), B, T, C, H);
  std::vector<float> qkvf(qkv.begin(), qkv.end()), outf(out.size()), attf(att.size());
  cpu::attention_forward(outf.data(), attf.data(), qkvf.data(), B, T, C, H);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(outf[i], out[i], 1e-5);
}

}  // namespace
}  // namespace railyard
