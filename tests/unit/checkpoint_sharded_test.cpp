// Sharded moments (ZeRO-1 layout): on one rank under ctest; tests/integration/ckpt_mpi_units.sh
// runs it on 2 and 3 ranks, where shards cut tensors mid-row and the file must be the same as
// an unsharded save (collective hyperslabs with parallel HDF5, gathered otherwise and in async
// saves).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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

TEST_F(Sharded, AsyncGatheredSaveEqualsTheSyncSave) {
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
