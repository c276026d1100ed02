// Sharded moments (ZeRO-1 layout): on one rank under ctest; tests/integration/ckpt_mpi_units.sh
// runs it on 2 and 3 ranks, where shards cut tensors mid-row and the file must be the same as
// an unsharded save (collective hyperslabs with parallel HDF5, gathered otherwise; background
// saves through each rank's part file, merged by rank 0).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "../../runtime/ckpt/moment_parts.hpp"
#include "checkpoint_test_util.hpp"
#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/gpt_checkpoint.hpp"

using namespace railyard;
namespace fs = std::filesystem;

namespace {

class Sharded : public ::testing::Test {
 protected:
  void SetUp() override {
    long pid = comm_.rank() == 0 ? static_cast<long>(getpid()) : 0;
    comm_.broadcast(&pid, sizeof pid, 0);
    dir_ = std::string(RAILYARD_BUILD_DIR) + "/tests/unit/scratch-sharded-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
           std::to_string(pid);
    if (comm_.rank() == 0) fs::remove_all(dir_);
    comm_.barrier();
    full_ = ckpt_test::make_state(layout_, 2.5f);
  }
  void TearDown() override {
    comm_.barrier();
    if (comm_.rank() == 0) fs::remove_all(dir_);
  }

  // This rank's shard: uneven cuts that fall inside tensors, not on their boundaries.
  ModelState shard() const {
    const size_t total = layout_.total();
    const size_t n = static_cast<size_t>(comm_.size());
    const size_t r = static_cast<size_t>(comm_.rank());
    auto cut = [&](size_t q) { return q == n ? total : (total * q) / n + (q ? 13 : 0); };
    ModelState s;
    s.params = full_.params;
    s.shard_begin = cut(r);
    s.shard_end = cut(r + 1);
    s.m.assign(full_.m.begin() + s.shard_begin, full_.m.begin() + s.shard_end);
    s.v.assign(full_.v.begin() + s.shard_begin, full_.v.begin() + s.shard_end);
    s.adam_step = full_.adam_step;
    return s;
  }

  // The temporaries (".ckpt-...") in the directory, as rank 0 sees them.
  std::vector<std::string> temporaries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(".ckpt-", 0) == 0) out.push_back(name);
    }
    return out;
  }

  void expect_full(const LoadedCheckpoint& got) const {
    for (const TensorSpec& t : layout_.tensors()) {
      for (size_t i = t.offset; i < t.offset + t.numel; ++i) {
        ASSERT_EQ(got.state.params[i], full_.params[i]) << t.name << " " << i;
        ASSERT_EQ(got.state.m[i], full_.m[i]) << t.name << " " << i;
        ASSERT_EQ(got.state.v[i], full_.v[i]) << t.name << " " << i;
      }
    }
  }

  Communicator& comm_ = Communicator::world();
  GptConfig model_ = ckpt_test::tiny_model();
  ParamLayout layout_ = gpt_param_layout(model_);
  ModelState full_;
  std::string dir_;
};

TEST_F(Sharded, SyncSaveHoldsTheWholeLogicalTensors) {
  CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
  TrainProgress p = ckpt_test::make_progress(7);
  p.world_size = comm_.size();
  const SaveResult r = store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(), p);
  const LoadedCheckpoint got = ckpt_test::read_gpt(r.path, &model_);
  expect_full(got);
  EXPECT_EQ(got.progress.world_size, comm_.size());
}

TEST_F(Sharded, AsyncSaveEqualsTheSyncSave) {
  CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
  store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
             ckpt_test::make_progress(8));
  store.save_async(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
                   ckpt_test::make_progress(9));
  const auto r = store.wait();
  ASSERT_TRUE(r.has_value());
  const LoadedCheckpoint a = ckpt_test::read_gpt(dir_ + "/ckpt-00000008.h5", &model_);
  const LoadedCheckpoint b = ckpt_test::read_gpt(r->path, &model_);
  expect_full(b);
  EXPECT_EQ(a.state.params, b.state.params);
  EXPECT_EQ(a.state.m, b.state.m);
  EXPECT_EQ(a.state.v, b.state.v);
  if (comm_.rank() == 0) {
    EXPECT_TRUE(temporaries().empty());
  }
}

// A background save of shards is collected at the step boundaries (background_finished) as the
// trainer does; each rank gets its own shard back as the spare (nothing was gathered into it).
TEST_F(Sharded, AsyncSaveFinishesAtStepBoundaries) {
  CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
  store.save_async(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
                   ckpt_test::make_progress(12));
  int boundaries = 0;
  while (!store.background_finished()) {
    ASSERT_LT(++boundaries, 100000) << "the background save never finished";
    usleep(200);
  }
  const auto r = store.wait();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->path, dir_ + "/ckpt-00000012.h5");
  expect_full(ckpt_test::read_gpt(r->path, &model_));
  const std::optional<ModelState> spare = store.take_spare();
  ASSERT_TRUE(spare.has_value());
  EXPECT_EQ(spare->m, shard().m);
  EXPECT_EQ(spare->shard_begin, shard().shard_begin);
  if (comm_.rank() == 0) {
    EXPECT_TRUE(temporaries().empty());
  }
}

// What a kill -9 during a background save leaves (the parts and rank 0's temporary file) is not
// a checkpoint: the next start removes it and resumes from the newest complete one.
TEST_F(Sharded, AKilledAsyncSaveLeavesThePreviousCheckpointNewest) {
  {
    CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
    store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
               ckpt_test::make_progress(4));
  }
  if (comm_.rank() != 0) {
    std::ofstream(moment_part_path(dir_, 5, comm_.rank(), comm_.size())) << "half a part";
  } else {
    std::ofstream(dir_ + "/.ckpt-00000005.h5.tmp-12345") << "half a file";
  }
  comm_.barrier();
  CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
  if (comm_.rank() == 0) {
    EXPECT_TRUE(temporaries().empty());
  }
  const auto got = store.load_latest(gpt_attributes(model_), nullptr);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->progress.step, 4);
  expect_full(*got);
}

// A part writer that fails (here: its file name is taken by a directory) fails the save on
// every rank, at the same step boundary, and leaves neither a checkpoint nor a part.
TEST_F(Sharded, AFailedPartFailsTheSaveOnEveryRank) {
  CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
  store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
             ckpt_test::make_progress(6));
  const int bad = comm_.size() - 1;
  if (comm_.rank() == bad && bad > 0) {
    fs::create_directory(moment_part_path(dir_, 7, bad, comm_.size()));
  }
  comm_.barrier();
  store.save_async(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
                   ckpt_test::make_progress(7));
  while (!store.background_finished()) usleep(200);
  if (bad > 0) {
    EXPECT_THROW(store.wait(), CheckpointError);
    if (comm_.rank() == bad) fs::remove(moment_part_path(dir_, 7, bad, comm_.size()));
    comm_.barrier();
    if (comm_.rank() == 0) {
      EXPECT_FALSE(fs::exists(dir_ + "/ckpt-00000007.h5"));
      EXPECT_TRUE(temporaries().empty());
    }
  } else {
    EXPECT_TRUE(store.wait().has_value());
  }
  const auto got = store.load_latest(gpt_attributes(model_), nullptr);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->progress.step, bad > 0 ? 6 : 7);
}

TEST_F(Sharded, EveryRankLoadsTheWholeState) {
  CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
  store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
             ckpt_test::make_progress(11));
  const auto got = store.load_latest(gpt_attributes(model_), nullptr);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->progress.step, 11);
  EXPECT_EQ(got->progress.config_json, ckpt_test::make_progress(11).config_json);
  // The /model attributes and the tensors they describe reach every rank too.
  const GptConfig model = gpt_config_from(got->model);
  for (const GptConfigField& f : kGptConfigFields) EXPECT_EQ(model.*f.member, model_.*f.member);
  EXPECT_EQ(got->tensors.total, layout_.total());
  ASSERT_EQ(got->tensors.tensors.size(), layout_.tensors().size());
  EXPECT_EQ(got->tensors.tensors.back().name, layout_.tensors().back().name);
  expect_full(*got);
}

TEST_F(Sharded, ABadShardOnOneRankFailsEveryRank) {
  CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
  ModelState s = shard();
  if (comm_.rank() == comm_.size() - 1) s.m.pop_back();
  EXPECT_THROW(store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), s,
                          ckpt_test::make_progress(3)),
               CheckpointError);
  // Every rank is still in step: a collective save afterwards works.
  store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
             ckpt_test::make_progress(4));
  EXPECT_TRUE(ckpt_test::read_gpt(dir_ + "/ckpt-00000004.h5", &model_).progress.step == 4);
}

TEST_F(Sharded, AWriteErrorFailsEveryRankAndLeavesNoTemporary) {
  CheckpointStore store(dir_, 0, comm_, gpt_checkpoint_schema());
  if (comm_.rank() == 0) fs::create_symlink("/nonexistent", dir_ + "/ckpt-00000005.h5");
  comm_.barrier();
  EXPECT_THROW(store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), shard(),
                          ckpt_test::make_progress(5)),
               CheckpointError);
  if (comm_.rank() == 0) {
    for (const auto& e : fs::directory_iterator(dir_)) {
      EXPECT_EQ(e.path().filename().string().find(".ckpt-"), std::string::npos) << e.path();
    }
  }
}

}  // namespace
