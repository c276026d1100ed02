// The training loop's contract with an Engine, checked against a recording engine: one
// zero_grad, --grad-accum forward_backward calls scaled 1/accum (the last one flagged), one
// reduce_gradients and one optimizer_step at the scheduled learning rate per step; the step
// loss is the mean of the micro-steps; observers see the run's events in order; setup
// failures become exit codes.
#include "railyard/trainer.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <stdexcept>

#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/gpt_checkpoint.hpp"
#include "railyard/lr_schedule.hpp"
#include "railyard/preempt.hpp"
#include "railyard/token_dataset.hpp"

namespace railyard {
namespace {

namespace fs = std::filesystem;

struct Calls {
  int zero_grad = 0, reduce = 0;
  std::vector<float> scales;
  std::vector<bool> last;
  std::vector<float> lrs;
  std::vector<float> returned;
};

class RecordingEngine : public Engine {
 public:
  RecordingEngine(const GptConfig& cfg, Calls& calls) : cfg_(cfg), calls_(calls) {
    layout_.add("w", {4}, true);
  }
  const GptConfig& config() const override { return cfg_; }
  const ParamLayout& layout() const override { return layout_; }
  std::string describe() const override { return "recording"; }
  void zero_grad() override { ++calls_.zero_grad; }
  float forward_backward(std::span<const int32_t> tokens, std::span<const int32_t>, int B, int T,
                         float grad_scale, bool last_micro_step) override {
    EXPECT_EQ(tokens.size(), static_cast<size_t>(B * T));
    calls_.scales.push_back(grad_scale);
    calls_.last.push_back(last_micro_step);
    // A loss that depends on the data, so the mean over micro-steps is checked.
    float loss = static_cast<float>(tokens[0]) / 100.0f;
    calls_.returned.push_back(loss);
    return loss;
  }
  float evaluate(std::span<const int32_t>, std::span<const int32_t>, int, int) override {
    return 1.0f;
  }
  void reduce_gradients() override { ++calls_.reduce; }
  float optimizer_step(const AdamWParams&, float lr) override {
    calls_.lrs.push_back(lr);
    return 0.5f;
  }
  void save_state(ModelState& out) override { out.params.assign(layout_.total(), 0.0f); }
  void load_state(const ModelState&) override {}

 private:
  GptConfig cfg_;
  ParamLayout layout_;
  Calls& calls_;
};

class Recorder : public TrainObserver {
 public:
  void on_run(const RunEvent& e) override { kinds.push_back(e.kind); }
  void on_step(const StepEvent& e) override { steps.push_back(e); }
  std::vector<std::string> kinds;
  std::vector<StepEvent> steps;
};

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = (fs::temp_directory_path() / ("railyard_trainer_" + std::to_string(getpid()) + ".h5"))
                .string();
    std::vector<uint32_t> t(4000);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint32_t>(i % 200);
    write_token_file(data_, t, 256);
    cfg_.data = {data_};
    cfg_.device = "cpu";
    cfg_.layers = 1, cfg_.heads = 1, cfg_.dim = 8, cfg_.seq = 16;
    cfg_.steps = 5, cfg_.batch = 2, cfg_.grad_accum = 3;
    cfg_.lr = 1e-2, cfg_.warmup = 2;
    cfg_.signals = "";
  }
  void TearDown() override { fs::remove(data_); }
  std::string data_;
  TrainConfig cfg_;
};

TEST_F(TrainerTest, DrivesTheEngineOncePerStepAndMicroStep) {
  Calls calls;
  GptConfig seen;
  Trainer t(cfg_, Communicator::world(),
            [&](const GptConfig& g, const EngineOptions& o, Communicator&, uint64_t seed) {
              seen = g;
              EXPECT_EQ(o.micro_batch, 2);
              EXPECT_EQ(o.seq, 16);
              EXPECT_EQ(seed, cfg_.seed);
              return std::make_unique<RecordingEngine>(g, calls);
            });
  Recorder rec;
  t.add_observer(rec);
  ASSERT_EQ(t.run(), exit_code::kOk);

  EXPECT_EQ(seen.vocab, 256);
  EXPECT_EQ(seen.max_seq, 16);
  EXPECT_EQ(calls.zero_grad, 5);
  EXPECT_EQ(calls.reduce, 5);
  ASSERT_EQ(calls.scales.size(), 15u);
  for (size_t i = 0; i < 15; ++i) {
    EXPECT_FLOAT_EQ(calls.scales[i], 1.0f / 3.0f);
    EXPECT_EQ(calls.last[i], i % 3 == 2) << i;
  }
  LrSchedule sched{cfg_.lr, cfg_.warmup, cfg_.steps, cfg_.min_lr_ratio};
  ASSERT_EQ(calls.lrs.size(), 5u);
  for (int s = 0; s < 5; ++s) EXPECT_FLOAT_EQ(calls.lrs[s], static_cast<float>(sched.at(s)));

  const int world = Communicator::world().size();
  ASSERT_EQ(t.losses().size(), 5u);
  ASSERT_EQ(rec.steps.size(), 5u);
  for (int s = 0; s < 5 && world == 1; ++s) {
    double mean = 0;  // summed in double in micro-step order, as the trainer does
    for (int k = 0; k < 3; ++k) mean += calls.returned[3 * s + k];
    mean /= 3;
    EXPECT_DOUBLE_EQ(t.losses()[s], mean) << s;
  }
  EXPECT_EQ(rec.steps.back().step, 5);
  EXPECT_EQ(rec.steps.back().tokens_seen, 5 * 3 * 2 * 16 * world);
  EXPECT_DOUBLE_EQ(rec.steps.back().grad_norm, 0.5);
  std::vector<std::string> want = {"launch"};
  // Rank 0 gathers every rank's binding.
  for (int r = 0; r < world && Communicator::world().rank() == 0; ++r) want.push_back("bind");
  want.insert(want.end(), {"data", "start", "finish"});
  EXPECT_EQ(rec.kinds, want);
}

TEST_F(TrainerTest, SetupFailuresBecomeExitCodes) {
  auto failing = [](auto error) {
    return [error](const GptConfig&, const EngineOptions&, Communicator&,
                   uint64_t) -> std::unique_ptr<Engine> { throw error; };
  };
  EXPECT_EQ(Trainer(cfg_, Communicator::world(), failing(std::invalid_argument("bad batch"))).run(),
            exit_code::kUsage);
  EXPECT_EQ(Trainer(cfg_, Communicator::world(), failing(std::runtime_error("no GPU"))).run(),
            exit_code::kFailure);
  TrainConfig c = cfg_;
  c.heads = 3;  // does not divide dim 8: GptConfig::validate
  Calls calls;
  EXPECT_EQ(Trainer(c, Communicator::world(),
                    [&](const GptConfig& g, const EngineOptions&, Communicator&, uint64_t) {
                      return std::make_unique<RecordingEngine>(g, calls);
                    })
                .run(),
            exit_code::kUsage);
  c = cfg_;
  c.signals = "TERM=explode";
  EXPECT_EQ(Trainer(c, Communicator::world(), failing(std::runtime_error("unreached"))).run(),
            exit_code::kUsage);
}

// Saves a whole (finite) state, so checkpoints are written.
class SavingEngine : public RecordingEngine {
 public:
  using RecordingEngine::RecordingEngine;
  void save_state(ModelState& out) override {
    out.params.assign(layout().total(), 0.25f);
    out.m.assign(layout().total(), 0.0f);
    out.v.assign(layout().total(), 0.0f);
    out.shard_begin = 0;
    out.shard_end = layout().total();
  }
};

// Goes bad at step `bad_step` (1-based): a NaN loss, or an infinite gradient norm.
class DivergingEngine : public SavingEngine {
 public:
  DivergingEngine(const GptConfig& cfg, Calls& calls, int bad_step, bool in_norm)
      : SavingEngine(cfg, calls), calls_(calls), bad_step_(bad_step), in_norm_(in_norm) {}
  float forward_backward(std::span<const int32_t> tokens, std::span<const int32_t> targets, int B,
                         int T, float scale, bool last) override {
    const float loss = RecordingEngine::forward_backward(tokens, targets, B, T, scale, last);
    return !in_norm_ && calls_.zero_grad == bad_step_ ? std::nanf("") : loss;
  }
  float optimizer_step(const AdamWParams& hp, float lr) override {
    const float norm = RecordingEngine::optimizer_step(hp, lr);
    return in_norm_ && calls_.zero_grad == bad_step_ ? HUGE_VALF : norm;
  }

 private:
  Calls& calls_;
  int bad_step_;
  bool in_norm_;
};

TEST_F(TrainerTest, ADivergedStepStopsWithItsOwnExitCodeAndIsNeverSaved) {
  for (bool in_norm : {false, true}) {
    const std::string dir = data_ + ".ckpt" + std::to_string(in_norm);
    fs::remove_all(dir);
    TrainConfig c = cfg_;
    c.ckpt_dir = dir;
    c.ckpt_every = 1;
    c.keep = 0;
    Calls calls;
    Trainer t(c, Communicator::world(),
              [&](const GptConfig& g, const EngineOptions&, Communicator&, uint64_t) {
                return std::make_unique<DivergingEngine>(g, calls, 3, in_norm);
              });
    EXPECT_EQ(t.run(), exit_code::kDiverged);
    EXPECT_EQ(calls.zero_grad, 3);  // no step after the bad one
    const std::vector<CheckpointInfo> infos = list_checkpoints(dir, gpt_checkpoint_schema());
    ASSERT_EQ(infos.size(), 2u);
    // The last finite step, none of step 3 (the recording engine's one-tensor layout is not a
    // GPT's, so the files do not verify as GPT checkpoints; their names are what counts here).
    EXPECT_EQ(infos[0].step, 2);
    fs::remove_all(dir);
  }
}

// Raises SIGTERM from inside the first validation batch.
// The count lives with the test: the trainer destroys its engine before run() returns.
class SignalInValidationEngine : public SavingEngine {
 public:
  SignalInValidationEngine(const GptConfig& g, Calls& calls, int& evaluations)
      : SavingEngine(g, calls), evaluations_(evaluations) {}
  float evaluate(std::span<const int32_t> t, std::span<const int32_t> y, int B, int T) override {
    if (++evaluations_ == 1) raise(SIGTERM);
    return RecordingEngine::evaluate(t, y, B, T);
  }

 private:
  int& evaluations_;
};

TEST_F(TrainerTest, ASignalDuringALongValidationStopsAtTheNextBatchWithACheckpoint) {
  const std::string dir = data_ + ".ckpt-val";
  fs::remove_all(dir);
  TrainConfig c = cfg_;
  c.ckpt_dir = dir;
  c.val_data = {data_};
  c.val_every = 1;
  c.val_batches = 100000;  // minutes, were it not interrupted
  c.signals = "TERM=exit";
  c.requeue = false;
  Calls calls;
  int evaluations = 0;
  Trainer t(c, Communicator::world(),
            [&](const GptConfig& g, const EngineOptions&, Communicator&, uint64_t) {
              return std::make_unique<SignalInValidationEngine>(g, calls, evaluations);
            });
  EXPECT_EQ(t.run(), exit_code::kStopped);
  EXPECT_EQ(evaluations, 1);
  const std::vector<CheckpointInfo> infos = list_checkpoints(dir, gpt_checkpoint_schema());
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].step, 1);  // the last completed step
  fs::remove_all(dir);
}

TEST_F(TrainerTest, AModelTooLargeForMemoryIsRefusedWithWhatItNeeds) {
  for (int which = 0; which < 3; ++which) {
    TrainConfig c = cfg_;
    if (which == 0) c.vocab = 1 << 30;
    if (which == 1) c.dim = 1 << 20;
    if (which == 2) c.layers = 1 << 24;
    bool built = false;
    Trainer t(c, Communicator::world(),
              [&](const GptConfig&, const EngineOptions&, Communicator&,
                  uint64_t) -> std::unique_ptr<Engine> {
                built = true;
                throw std::runtime_error("unreached");
              });
    testing::internal::CaptureStderr();
    EXPECT_EQ(t.run(), exit_code::kUsage) << which;
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_FALSE(built);
    EXPECT_NE(err.find("GiB of host memory"), std::string::npos) << err;
    EXPECT_NE(err.find("lower --dim, --layers, --vocab, --seq or --batch"), std::string::npos)
        << err;
  }
}

TEST_F(TrainerTest, ASignalDuringStartUpStopsBeforeTheCheckpointLoadAndSavesNothing) {
  const std::string dir = data_ + ".ckpt-start";
  fs::remove_all(dir);
  TrainConfig c = cfg_;
  c.ckpt_dir = dir;
  c.signals = "TERM=exit";
  c.requeue = false;
  Calls calls;
  Trainer t(c, Communicator::world(),
            [&](const GptConfig& g, const EngineOptions&, Communicator&, uint64_t) {
              raise(SIGTERM);  // arrives during the (here instant, often long) start-up
              return std::make_unique<SavingEngine>(g, calls);
            });
  Recorder rec;
  t.add_observer(rec);
  testing::internal::CaptureStderr();
  EXPECT_EQ(t.run(), exit_code::kStopped);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(calls.zero_grad, 0);
  if (Communicator::world().rank() == 0) {
    EXPECT_NE(err.find("during start-up, before training"), std::string::npos) << err;
  }
  EXPECT_TRUE(
      list_checkpoints(dir, gpt_checkpoint_schema()).empty());  // nothing trained, nothing saved
  EXPECT_EQ(std::count(rec.kinds.begin(), rec.kinds.end(), "load"), 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace railyard
