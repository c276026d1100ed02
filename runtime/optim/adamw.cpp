#include "railyard/adamw.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace railyard {

double global_norm(const float* g, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  return std::sqrt(s);
}

float clip_factor(double norm, float clip) {
  if (clip <= 0) return 1.0f;
  const double k = static_cast<double>(clip) / (norm + 1e-6);
  return k < 1.0 ? static_cast<float>(k) : 1.0f;
}

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamWParams& hp,
                  float lr, float grad_mult, int64_t t, bool decay) {
  if (t < 1)
    throw std::invalid_argument("adamw_update: step t must be >= 1, got " + std::to_string(t));
  // Bias corrections in double: b^t underflows gracefully and loses nothing for large t.
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta1), t));
  const float bc2 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta2), t));
  const float b1 = hp.beta1, b2 = hp.beta2;
  const float shrink = decay ? 1.0f - lr * hp.weight_decay : 1.0f;
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] * grad_mult;
    m[i] = b1 * m[i] + (1.0f - b1) * gi;
    v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
    const float mhat = m[i] / bc1;
    const float vhat = v[i] / bc2;
    p[i] = p[i] * shrink - lr * mhat / (std::sqrt(vhat) + hp.eps);
  }
}

void adamw_step(const ParamLayout& layout, float* params, const float* grads, float* m, float* v,
                const AdamWParams& hp, float lr, float grad_mult, int64_t t) {
  for (const TensorSpec& s : layout.tensors()) {
    adamw_update(params + s.offset, grads + s.offset, m + s.offset, v + s.offset, s.numel, hp, lr,
                 grad_mult, t, s.decay);
  }
}

}  // namespace railyard
