#pragma once
// Shared by the checkpoint unit tests: a tiny GPT's state with distinct values, and a scratch
// directory per test.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "railyard/checkpoint.hpp"
#include "railyard/gpt_checkpoint.hpp"
#include "railyard/gpt_config.hpp"
#include "railyard/param_layout.hpp"
#include "railyard/train_state.hpp"

namespace ckpt_test {

inline railyard::GptConfig tiny_model() {
  railyard::GptConfig c;
  c.vocab = 60;
  c.padded_vocab = 64;
  c.max_seq = 16;
  c.layers = 2;
  c.heads = 2;
  c.dim = 16;
  return c;
}

// Every element differs from its neighbours and between params, m and v; `salt` varies steps.
inline railyard::ModelState make_state(const railyard::ParamLayout& layout, float salt) {
  railyard::ModelState s;
  const size_t n = layout.total();
  s.params.resize(n);
  s.m.resize(n);
  s.v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    s.params[i] = std::sin(0.37f * static_cast<float>(i) + salt);
    s.m[i] = 0.01f * std::cos(0.11f * static_cast<float>(i) + salt);
    s.v[i] = 1e-4f * static_cast<float>((i * 7919 + static_cast<size_t>(salt * 13)) % 1000);
  }
  s.shard_begin = 0;
  s.shard_end = n;
  s.adam_step = 17;
  return s;
}

inline railyard::TrainProgress make_progress(int64_t step) {
  railyard::TrainProgress p;
  p.step = step;
  p.tokens_seen = step * 4096;
  p.lr = 3e-4 * (1.0 + 1.0 / static_cast<double>(step + 3));
  p.loader = {1234, 2, static_cast<uint64_t>(step * 8)};
  p.rng_state = {0x0123456789abcdefULL, static_cast<uint64_t>(step), 42};
  p.world_size = 1;
  p.config_json = R"({"model":{"layers":2},"steps":)" + std::to_string(step) + "}";
  return p;
}

// read_checkpoint of a GPT checkpoint, expecting `expect` when given.
inline railyard::LoadedCheckpoint read_gpt(const std::string& path,
                                           const railyard::GptConfig* expect = nullptr) {
  const railyard::Attributes want =
      expect ? railyard::gpt_attributes(*expect) : railyard::Attributes{};
  return railyard::read_checkpoint(path, railyard::gpt_checkpoint_schema(),
                                   expect ? &want : nullptr);
}

// A fresh directory under the build tree, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::string(RAILYARD_BUILD_DIR) + "/tests/unit/scratch-" + info->test_suite_name() +
            "-" + info->name() + "-" + std::to_string(getpid());
    std::filesystem::remove_all(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ckpt_test
