// The CPU kernels' pool: every task runs exactly once, nested calls run inline, the thread
// count can change between jobs, and a product's bits do not depend on it.

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <stdexcept>
#include <vector>

#include "railyard/cpu_kernels.hpp"
#include "railyard/cpu_parallel.hpp"

namespace railyard {
namespace {

TEST(CpuParallel, EveryTaskOnceAtEveryThreadCount) {
  for (int threads : {1, 2, 3, 1}) {
    cpu::set_threads(threads);
    EXPECT_EQ(cpu::threads(), threads);
    for (int n : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      cpu::parallel_for(n, [&](int i) {
        // A nested job runs on this task's thread and still runs all of its tasks.
        std::atomic<int> inner{0};
        cpu::parallel_for(3, [&](int) { ++inner; });
        hits[static_cast<size_t>(i)] += inner == 3 ? 1 : 100;
      });
      for (int i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << i;
    }
  }
  EXPECT_THROW(cpu::set_threads(0), std::invalid_argument);
  EXPECT_GE(cpu::affinity_cpus(), 1);
}

// Products large enough to be cut into several blocks, in both directions, transposed or not.
TEST(CpuParallel, MatmulBitsDoNotDependOnTheThreadCount) {
  const int N = 300, IC = 96, OC = 520;
  std::mt19937 rng(3);
  std::normal_distribution<float> d;
  std::vector<float> x(N * IC), w(OC * IC), dout(N * OC);
  for (auto* v : {&x, &w, &dout}) {
    for (float& f : *v) f = d(rng);
  }
  std::vector<float> out[2], dx[2], dw[2];
  for (int k = 0; k < 2; ++k) {
    cpu::set_threads(k == 0 ? 1 : 3);
    out[k].assign(N * OC, 0.0f);
    dx[k].assign(N * IC, 0.0f);
    dw[k].assign(OC * IC, 0.0f);
    cpu::matmul_forward(out[k].data(), x.data(), w.data(), static_cast<const float*>(nullptr), N,
                        IC, OC);
    cpu::matmul_backward(dx[k].data(), dw[k].data(), static_cast<float*>(nullptr), dout.data(),
                         x.data(), w.data(), N, IC, OC);
  }
  cpu::set_threads(1);
  EXPECT_TRUE(out[0] == out[1]);
  EXPECT_TRUE(dx[0] == dx[1]);
  EXPECT_TRUE(dw[0] == dw[1]);
}

}  // namespace
}  // namespace railyard
