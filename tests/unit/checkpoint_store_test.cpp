// The checkpoint directory: keep-N, stale temporaries, symlinks, listing, newest-valid-wins,
// and the background writer.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "checkpoint_test_util.hpp"
#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/gpt_checkpoint.hpp"

using namespace railyard;
using ckpt_test::ScratchDir;
namespace fs = std::filesystem;

namespace {

class Store : public ::testing::Test {
 protected:
  SaveResult save(CheckpointStore& store, int64_t step) {
    return store.save(gpt_stored_tensors(layout_), gpt_attributes(model_),
                      ckpt_test::make_state(layout_, static_cast<float>(step)),
                      ckpt_test::make_progress(step));
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_.path())) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }
  void corrupt(int64_t step) {
    std::string path = dir_.path() + "/ckpt-" + std::string(8 - std::to_string(step).size(), '0') +
                       std::to_string(step) + ".h5";
    fs::resize_file(path, fs::file_size(path) - 100);
  }

  ScratchDir dir_;
  GptConfig model_ = ckpt_test::tiny_model();
  ParamLayout layout_ = gpt_param_layout(model_);
  Communicator& comm_ = Communicator::world();
};

TEST_F(Store, KeepsTheLastN) {
  CheckpointStore store(dir_.path(), 2, comm_, gpt_checkpoint_schema());
  for (int64_t step : {10, 20, 30, 40}) save(store, step);
  EXPECT_EQ(names(), (std::vector<std::string>{"ckpt-00000030.h5", "ckpt-00000040.h5"}));
}

TEST_F(Store, KeepZeroKeepsAll) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  for (int64_t step : {1, 2, 3}) save(store, step);
  EXPECT_EQ(names().size(), 3u);
}

TEST_F(Store, NegativeKeepIsAnError) {
  EXPECT_THROW(CheckpointStore(dir_.path(), -1, comm_, gpt_checkpoint_schema()), CheckpointError);
}

TEST_F(Store, RemovesStaleTemporariesOnlyOnStart) {
  fs::create_directories(dir_.path());
  std::ofstream(dir_.path() + "/.ckpt-00000005.h5.tmp-4242") << "partial";
  std::ofstream(dir_.path() + "/notes.txt") << "mine";
  CheckpointStore store(dir_.path(), 3, comm_, gpt_checkpoint_schema());
  EXPECT_EQ(names(), (std::vector<std::string>{"notes.txt"}));
  save(store, 6);
  EXPECT_EQ(names(), (std::vector<std::string>{"ckpt-00000006.h5", "notes.txt"}));
}

TEST_F(Store, LoadLatestSkipsDamagedAndReportsWhy) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  for (int64_t step : {10, 20, 30}) save(store, step);
  corrupt(30);
  std::vector<std::string> warnings;
  auto got = store.load_latest(gpt_attributes(model_),
                               [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->progress.step, 20);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("ckpt-00000030.h5"), std::string::npos) << warnings[0];
}

TEST_F(Store, LoadLatestRejectsAnotherModel) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  save(store, 5);
  GptConfig other = model_;
  other.heads = 4;
  std::vector<std::string> warnings;
  EXPECT_FALSE(store.load_latest(gpt_attributes(other),
                                 [&](const std::string& w) { warnings.push_back(w); }));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("heads 2 (this run: 4)"), std::string::npos) << warnings[0];
}

TEST_F(Store, EmptyDirectoryHasNothingToLoad) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  EXPECT_FALSE(store.load_latest(gpt_attributes(model_), nullptr).has_value());
}

TEST_F(Store, PruningNeverDeletesTheCheckpointResumedFrom) {
  // A damaged newer file made the run resume from 10; its next save (15) must not prune 10's
  // successor away, and the damaged newer file stays rejected.
  {
    CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
    save(store, 10);
    save(store, 20);
  }
  corrupt(20);
  CheckpointStore store(dir_.path(), 1, comm_, gpt_checkpoint_schema());
  auto got = store.load_latest(gpt_attributes(model_), nullptr);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->progress.step, 10);
  save(store, 15);
  EXPECT_EQ(names(), (std::vector<std::string>{"ckpt-00000015.h5", "ckpt-00000020.h5"}));
  got = store.load_latest(gpt_attributes(model_), nullptr);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->progress.step, 15);
}

TEST_F(Store, RefusesToWriteThroughASymlinkAndDeletesNothing) {
  CheckpointStore store(dir_.path(), 1, comm_, gpt_checkpoint_schema());
  save(store, 1);
  const std::string target = dir_.path() + "-target";
  std::ofstream(target) << "precious";
  fs::create_symlink(target, dir_.path() + "/ckpt-00000002.h5");
  try {
    save(store, 2);
    FAIL() << "save through a symlink succeeded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("symlink"), std::string::npos) << e.what();
  }
  std::ifstream in(target);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious");
  EXPECT_EQ(names(), (std::vector<std::string>{"ckpt-00000001.h5", "ckpt-00000002.h5"}));
  fs::remove(target);
}

TEST_F(Store, ListReportsValidityAndReasons) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  for (int64_t step : {1, 2}) save(store, step);
  corrupt(2);
  const auto infos = store.list();
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].step, 2);
  EXPECT_FALSE(infos[0].valid);
  EXPECT_FALSE(infos[0].error.empty());
  EXPECT_EQ(infos[1].step, 1);
  EXPECT_TRUE(infos[1].valid) << infos[1].error;
  EXPECT_GT(infos[1].bytes, 0u);
  EXPECT_GT(infos[1].mtime, 0.0);
}

TEST_F(Store, AsyncSaveWritesInTheBackground) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  ModelState s = ckpt_test::make_state(layout_, 3.0f);
  const ModelState copy = s;
  store.save_async(gpt_stored_tensors(layout_), gpt_attributes(model_), std::move(s),
                   ckpt_test::make_progress(3));
  const auto result = store.wait();
  ASSERT_TRUE(result.has_value());
  EXPECT_GT(result->bytes, 0u);
  EXPECT_GT(store.write_rate(), 0.0);
  const LoadedCheckpoint got = ckpt_test::read_gpt(result->path, &model_);
  EXPECT_EQ(got.state.params, copy.params);
  EXPECT_FALSE(store.wait().has_value());
}

TEST_F(Store, BackgroundFinishedOnceTheFileIsDurable) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  EXPECT_TRUE(store.background_finished());  // nothing pending
  store.save_async(gpt_stored_tensors(layout_), gpt_attributes(model_),
                   ckpt_test::make_state(layout_, 4.0f), ckpt_test::make_progress(4));
  for (int i = 0; i < 5000 && !store.background_finished(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(store.background_finished());
  // Finished means written and renamed: the file is there before anyone waits for it.
  EXPECT_EQ(store.list().size(), 1u);
  ASSERT_TRUE(store.wait().has_value());
  EXPECT_TRUE(store.background_finished());
}

TEST_F(Store, AsyncSaveHandsItsBuffersBack) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  EXPECT_FALSE(store.take_spare().has_value());
  ModelState s = ckpt_test::make_state(layout_, 5.0f);
  const float* buffer = s.params.data();
  store.save_async(gpt_stored_tensors(layout_), gpt_attributes(model_), std::move(s),
                   ckpt_test::make_progress(5));
  ASSERT_TRUE(store.wait().has_value());
  auto spare = store.take_spare();
  ASSERT_TRUE(spare.has_value());
  EXPECT_EQ(spare->params.data(), buffer);  // the same allocation, not a copy
  EXPECT_EQ(spare->params.size(), layout_.total());
  EXPECT_FALSE(store.take_spare().has_value());
}

TEST_F(Store, SyncSaveWaitsForThePendingAsyncSave) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  store.save_async(gpt_stored_tensors(layout_), gpt_attributes(model_),
                   ckpt_test::make_state(layout_, 1.0f), ckpt_test::make_progress(1));
  save(store, 2);
  EXPECT_EQ(names(), (std::vector<std::string>{"ckpt-00000001.h5", "ckpt-00000002.h5"}));
  for (const auto& info : store.list()) EXPECT_TRUE(info.valid) << info.error;
}

TEST_F(Store, AsyncErrorIsRethrownByWait) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  fs::create_symlink("/nonexistent", dir_.path() + "/ckpt-00000004.h5");
  store.save_async(gpt_stored_tensors(layout_), gpt_attributes(model_),
                   ckpt_test::make_state(layout_, 1.0f), ckpt_test::make_progress(4));
  EXPECT_THROW(store.wait(), CheckpointError);
}

TEST_F(Store, RejectsStateThatDoesNotMatchTheLayout) {
  CheckpointStore store(dir_.path(), 0, comm_, gpt_checkpoint_schema());
  ModelState s = ckpt_test::make_state(layout_, 1.0f);
  s.v.pop_back();
  EXPECT_THROW(store.save(gpt_stored_tensors(layout_), gpt_attributes(model_), s,
                          ckpt_test::make_progress(1)),
               CheckpointError);
  EXPECT_TRUE(names().empty());
}

TEST_F(Store, DirectoryThatIsAFileIsAnError) {
  std::ofstream(dir_.path()) << "x";
  try {
    CheckpointStore store(dir_.path(), 1, comm_, gpt_checkpoint_schema());
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos) << e.what();
  }
  fs::remove(dir_.path());
}

}  // namespace
