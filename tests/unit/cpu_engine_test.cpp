// The CPU engine: steps, gradient accumulation, state round trips, determinism, overfitting a
// fixed batch, the factory's device errors, and (under mpirun -n 2 or more) the bucketed
// gradient average across ranks.

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "railyard/communicator.hpp"
#include "railyard/cpu_engine.hpp"
#ifdef RAILYARD_HAVE_CUDA
#include "railyard/cuda_engine.hpp"
#endif

namespace railyard {
namespace {

GptConfig tiny_config() {
  GptConfig cfg;
  cfg.vocab = 16;
  cfg.padded_vocab = 24;
  cfg.max_seq = 16;
  cfg.layers = 2;
  cfg.heads = 2;
  cfg.dim = 32;
  return cfg;
}

EngineOptions tiny_options(int B = 4, int T = 16) {
  EngineOptions opts;
  opts.device = "cpu";
  opts.micro_batch = B;
  opts.seq = T;
  opts.cpu_threads = 1;
  return opts;
}

// A fixed batch: tokens follow a pattern the model can learn; targets are the next token.
void fixed_batch(int B, int T, int vocab, uint64_t salt, std::vector<int32_t>& tokens,
                 std::vector<int32_t>& targets) {
  tokens.resize(static_cast<size_t>(B) * T);
  targets.resize(tokens.size());
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      tokens[b * T + t] = static_cast<int32_t>((b * 7 + t * 3 + salt) % vocab);
      targets[b * T + t] = static_cast<int32_t>((b * 7 + (t + 1) * 3 + salt) % vocab);
    }
  }
}

float train_step(CpuEngine& e, const std::vector<int32_t>& tok, const std::vector<int32_t>& tgt,
                 int B, int T, float lr) {
  e.zero_grad();
  const float loss = e.forward_backward(tok, tgt, B, T, 1.0f, true);
  e.reduce_gradients();
  e.optimizer_step(AdamWParams{}, lr);
  return loss;
}

TEST(CpuEngine, StartsFromGpt2InitAndTwoStepsChangeParams) {
  Communicator& comm = Communicator::world();
  CpuEngine e(tiny_config(), tiny_options(), comm, 5);
  std::vector<float> init(e.layout().total());
  gpt_init_params(tiny_config(), e.layout(), 5, init.data());
  ASSERT_EQ(std::vector<float>(e.params().begin(), e.params().end()), init);
  EXPECT_EQ(e.describe(), "cpu fp32, 1 thread");

  std::vector<int32_t> tok, tgt;
  fixed_batch(4, 16, 16, 0, tok, tgt);
  const float l0 = train_step(e, tok, tgt, 4, 16, 1e-3f);
  EXPECT_NEAR(l0, std::log(16.0f), 0.3f);  // a fresh model predicts nearly uniformly
  const float l1 = train_step(e, tok, tgt, 4, 16, 1e-3f);
  EXPECT_LT(l1, l0);
  size_t changed = 0;
  for (size_t i = 0; i < init.size(); ++i) changed += e.params()[i] != init[i];
  EXPECT_GT(changed, init.size() / 2);
  ModelState s;
  e.save_state(s);
  EXPECT_EQ(s.adam_step, 2);
}

TEST(CpuEngine, ZeroGradAndAccumulation) {
  Communicator& comm = Communicator::world();
  CpuEngine e(tiny_config(), tiny_options(), comm, 1);
  std::vector<int32_t> tok, tgt;
  fixed_batch(4, 16, 16, 3, tok, tgt);
  e.zero_grad();
  e.forward_backward(tok, tgt, 4, 16, 1.0f, true);
  const std::vector<float> full(e.grads().begin(), e.grads().end());
  double norm = 0;
  for (float g : full) norm += g * g;
  EXPECT_GT(norm, 0.0);
  e.zero_grad();
  for (float g : e.grads()) ASSERT_EQ(g, 0.0f);
  // Two half-weighted micro-steps accumulate to the full gradient.
  e.forward_backward(tok, tgt, 4, 16, 0.5f, false);
  e.forward_backward(tok, tgt, 4, 16, 0.5f, true);
  for (size_t i = 0; i < full.size(); ++i) {
    ASSERT_NEAR(e.grads()[i], full[i], 1e-6f + 1e-5f * std::abs(full[i])) << i;
  }
}

TEST(CpuEngine, EvaluateLeavesGradientsAlone) {
  Communicator& comm = Communicator::world();
  CpuEngine e(tiny_config(), tiny_options(), comm, 1);
  std::vector<int32_t> tok, tgt;
  fixed_batch(2, 8, 16, 1, tok, tgt);
  e.zero_grad();
  const float loss = e.evaluate(tok, tgt, 2, 8);  // smaller than the allocation
  EXPECT_GT(loss, 0.0f);
  for (float g : e.grads()) ASSERT_EQ(g, 0.0f);
  EXPECT_EQ(e.evaluate(tok, tgt, 2, 8), loss);
}

TEST(CpuEngine, SaveLoadRoundTripContinuesBitForBit) {
  Communicator& comm = Communicator::world();
  std::vector<int32_t> tok, tgt;
  fixed_batch(4, 16, 16, 2, tok, tgt);
  CpuEngine a(tiny_config(), tiny_options(), comm, 11);
  for (int i = 0; i < 3; ++i) train_step(a, tok, tgt, 4, 16, 1e-3f);
  ModelState saved;
  a.save_state(saved);
  EXPECT_EQ(saved.shard_begin, 0u);
  EXPECT_EQ(saved.shard_end, a.layout().total());

  CpuEngine b(tiny_config(), tiny_options(), comm, 999);  // different init, replaced by the load
  b.load_state(saved);
  ModelState reloaded;
  b.save_state(reloaded);
  EXPECT_EQ(reloaded.params, saved.params);
  EXPECT_EQ(reloaded.m, saved.m);
  EXPECT_EQ(reloaded.v, saved.v);
  EXPECT_EQ(reloaded.adam_step, 3);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(train_step(a, tok, tgt, 4, 16, 1e-3f), train_step(b, tok, tgt, 4, 16, 1e-3f));
  }
  EXPECT_TRUE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
}

TEST(CpuEngine, LoadStateRejectsMismatchedSizes) {
  Communicator& comm = Communicator::world();
  CpuEngine e(tiny_config(), tiny_options(), comm, 1);
  ModelState s;
  e.save_state(s);
  ModelState bad = s;
  bad.params.pop_back();
  EXPECT_THROW(e.load_state(bad), std::invalid_argument);
  bad = s;
  bad.m.resize(10);
  EXPECT_THROW(e.load_state(bad), std::invalid_argument);
  bad = s;
  bad.shard_begin = 8;
  EXPECT_THROW(e.load_state(bad), std::invalid_argument);
}

TEST(CpuEngine, SameSeedSameLosses) {
  Communicator& comm = Communicator::world();
  std::vector<int32_t> tok, tgt;
  CpuEngine a(tiny_config(), tiny_options(), comm, 3), b(tiny_config(), tiny_options(), comm, 3);
  for (int i = 0; i < 3; ++i) {
    fixed_batch(4, 16, 16, i, tok, tgt);
    EXPECT_EQ(train_step(a, tok, tgt, 4, 16, 3e-3f), train_step(b, tok, tgt, 4, 16, 3e-3f));
  }
}

TEST(CpuEngine, SameSeedSameLossesWithTwoThreads) {
  // Large enough products that they are split over both threads.
  Communicator& comm = Communicator::world();
  GptConfig cfg = tiny_config();
  cfg.dim = 128;
  EngineOptions opts = tiny_options(8, 16);
  opts.cpu_threads = 2;
  std::vector<int32_t> tok, tgt;
  CpuEngine a(cfg, opts, comm, 3), b(cfg, opts, comm, 3);
  EXPECT_EQ(a.threads(), 2);
  for (int i = 0; i < 3; ++i) {
    fixed_batch(8, 16, 16, i, tok, tgt);
    EXPECT_EQ(train_step(a, tok, tgt, 8, 16, 3e-3f), train_step(b, tok, tgt, 8, 16, 3e-3f));
  }
  EXPECT_TRUE(std::equal(a.params().begin(), a.params().end(), b.params().begin()));
}

// A resume on a node with other cores or another affinity continues bit for bit: the thread
// count may change the speed, never the bits. The products are large enough to be split.
TEST(CpuEngine, ThreadCountDoesNotChangeTheBits) {
  Communicator& comm = Communicator::world();
  GptConfig cfg = tiny_config();
  cfg.dim = 128;
  cfg.heads = 4;
  std::vector<float> losses[3];
  std::vector<float> params[3];
  for (int threads = 1; threads <= 3; ++threads) {
    EngineOptions opts = tiny_options(8, 16);
    opts.cpu_threads = threads;
    CpuEngine e(cfg, opts, comm, 3);  // constructed last: sets the process's thread count
    ASSERT_EQ(e.threads(), threads);
    std::vector<int32_t> tok, tgt;
    for (int i = 0; i < 3; ++i) {
      fixed_batch(8, 16, 16, i, tok, tgt);
      losses[threads - 1].push_back(train_step(e, tok, tgt, 8, 16, 3e-3f));
    }
    params[threads - 1].assign(e.params().begin(), e.params().end());
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(losses[i], losses[0]) << i + 1 << " threads against 1";
    EXPECT_TRUE(params[i] == params[0]) << i + 1 << " threads against 1: parameters differ";
  }
}

TEST(CpuEngine, OverfitsATinyFixedBatch) {
  Communicator& comm = Communicator::world();
  CpuEngine e(tiny_config(), tiny_options(), comm, 7);
  std::vector<int32_t> tok, tgt;
  fixed_batch(4, 16, 16, 5, tok, tgt);
  float loss = 0;
  for (int i = 0; i < 120; ++i) loss = train_step(e, tok, tgt, 4, 16, 1e-2f);
  EXPECT_LT(loss, 0.1f * std::log(16.0f)) << "final loss " << loss;
}

TEST(CpuEngine, BucketsCoverTheBufferLastLayerFirst) {
  Communicator& comm = Communicator::world();
  GptConfig cfg = tiny_config();
  cfg.dim = 512;  // h.*.mlp.fc.weight has 1M elements: a whole 4 MB bucket each
  cfg.heads = 4;
  cfg.layers = 3;
  cfg.padded_vocab = 2048 + 16;
  cfg.vocab = 2048;  // wte alone exceeds a bucket and must be split
  CpuEngine e(cfg, tiny_options(1, 4), comm, 1);
  const auto& buckets = e.buckets();
  const size_t cap = CpuEngine::kBucketBytes / sizeof(float);
  ASSERT_GT(buckets.size(), 3u);
  EXPECT_EQ(buckets.front().second, e.layout().total());
  EXPECT_EQ(buckets.back().first, 0u);
  for (size_t i = 0; i < buckets.size(); ++i) {
    EXPECT_LT(buckets[i].first, buckets[i].second);
    EXPECT_LE(buckets[i].second - buckets[i].first, cap);
    if (i > 0) {
      EXPECT_EQ(buckets[i].second, buckets[i - 1].first);
    }
  }
}

TEST(CpuEngine, RejectsCudaOnlyOptions) {
  Communicator& comm = Communicator::world();
  EngineOptions opts = tiny_options();
  opts.precision = "bf16";
  EXPECT_THROW(CpuEngine(tiny_config(), opts, comm, 1), std::invalid_argument);
  opts = tiny_options();
  opts.zero_stage = 1;
  EXPECT_THROW(CpuEngine(tiny_config(), opts, comm, 1), std::invalid_argument);
  opts = tiny_options(4, 17);  // longer than max_seq
  EXPECT_THROW(CpuEngine(tiny_config(), opts, comm, 1), std::invalid_argument);
}

TEST(EngineFactory, DevicesAndErrors) {
  Communicator& comm = Communicator::world();
  EngineOptions opts = tiny_options();
  auto cpu = make_engine(tiny_config(), opts, comm, 1);
  EXPECT_EQ(cpu->describe().rfind("cpu", 0), 0u);
  opts.device = "tpu";
  try {
    make_engine(tiny_config(), opts, comm, 1);
    FAIL() << "an unknown device must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tpu"), std::string::npos);
  }
#ifndef RAILYARD_HAVE_CUDA
  opts.device = "cuda";
  try {
    make_engine(tiny_config(), opts, comm, 1);
    FAIL() << "cuda in a build without CUDA must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("RAILYARD_CUDA=ON"), std::string::npos) << e.what();
  }
#else
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible: auto would pick it";
#endif
  // No rank sees a GPU, so all agree on the CPU, without the GPU-only options.
  opts.device = "auto";
  opts.precision = "bf16";
  EXPECT_EQ(make_engine(tiny_config(), opts, comm, 1)->describe().rfind("cpu fp32", 0), 0u);
}

// With one rank this checks that reduce_gradients leaves gradients alone; under mpirun -n N
// every rank trains on its own batch and must end with the average gradient and identical
// parameters.
TEST(CpuEngineMpi, AverageGradientAndIdenticalParams) {
  Communicator& comm = Communicator::world();
  const int world = comm.size(), rank = comm.rank();
  GptConfig cfg = tiny_config();
  cfg.dim = 256;  // 1.6M parameters: more than one 4 MB bucket
  cfg.heads = 4;
  CpuEngine e(cfg, tiny_options(2, 8), comm, 4);
  ASSERT_GT(e.buckets().size(), 1u);
  std::vector<int32_t> tok, tgt;
  // Expected: the mean over ranks of each rank's gradient, computed here for all ranks.
  std::vector<double> expected(e.layout().total(), 0.0);
  for (int r = 0; r < world; ++r) {
    CpuEngine solo(cfg, tiny_options(2, 8), comm, 4);
    fixed_batch(2, 8, 16, static_cast<uint64_t>(r), tok, tgt);
    solo.zero_grad();
    solo.forward_backward(tok, tgt, 2, 8, 1.0f, true);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += solo.grads()[i] / world;
  }
  fixed_batch(2, 8, 16, static_cast<uint64_t>(rank), tok, tgt);
  e.zero_grad();
  e.forward_backward(tok, tgt, 2, 8, 1.0f, true);
  e.reduce_gradients();
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(e.grads()[i], expected[i], 1e-6 + 1e-5 * std::abs(expected[i])) << i;
  }
  e.optimizer_step(AdamWParams{}, 1e-3f);
  // Identical parameters on every rank: each equals rank 0's.
  std::vector<float> p(e.params().begin(), e.params().end()), p0 = p;
  comm.broadcast(p0.data(), p0.size() * sizeof(float), 0);
  EXPECT_EQ(p, p0) << "rank " << rank;
}

}  // namespace
}  // namespace railyard
