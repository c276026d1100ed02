#pragma once
// Central finite differences in double precision, shared by the gradient-check tests.

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace railyard::test {

// Random values in [lo, hi), reproducible.
inline std::vector<double> random_vector(size_t n, uint64_t seed, double lo = -1.0,
                                         double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::vector<double> v(n);
  for (double& x : v) x = lo + (hi - lo) * (static_cast<double>(gen() >> 11) * 0x1.0p-53);
  return v;
}

// Index of the first element of `analytic` that disagrees with the central difference of
// `loss` with respect to x[i] (|a - n| > atol + rtol |n|), or -1 when all agree. x is
// perturbed in place and restored.
inline long first_mismatch(std::vector<double>& x, const std::vector<double>& analytic,
                           const std::function<double()>& loss, std::string* detail,
                           double h = 1e-5, double rtol = 1e-5, double atol = 1e-8) {
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double lp = loss();
    x[i] = saved - h;
    const double lm = loss();
    x[i] = saved;
    const double numeric = (lp - lm) / (2 * h);
    if (std::abs(analytic[i] - numeric) > atol + rtol * std::abs(numeric)) {
      if (detail != nullptr) {
        *detail = "element " + std::to_string(i) + ": analytic " + std::to_string(analytic[i]) +
                  ", finite difference " + std::to_string(numeric);
      }
      return static_cast<long>(i);
    }
  }
  return -1;
}

// Fails the current test, naming `what`, when the analytic gradient is wrong.
inline void expect_gradient(const char* what, std::vector<double>& x,
                            const std::vector<double>& analytic,
                            const std::function<double()>& loss) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  std::string detail;
  EXPECT_EQ(first_mismatch(x, analytic, loss, &detail), -1) << what << ": " << detail;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace railyard::test
