// The part files of a background save of ZeRO shards (runtime/ckpt/moment_parts.hpp): a part
// written from one shard and the local shard make the same checkpoint file as the whole state;
// a part whose bytes changed, a short part, and parts that do not partition the state are
// refused with the part named, so no checkpoint is made from them.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "../../runtime/ckpt/moment_parts.hpp"
#include "../../runtime/ckpt/streamed_checkpoint.hpp"
#include "checkpoint_test_util.hpp"
#include "railyard/durable_file.hpp"
#include "railyard/gpt_checkpoint.hpp"
#include "railyard/state_snapshot.hpp"

using namespace railyard;
using ckpt_test::ScratchDir;

namespace {

class MomentParts : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.path());
    full_ = ckpt_test::make_state(layout_, 1.5f);
    cut_ = layout_.total() / 2 + 5;  // inside a tensor
    low_ = shard(0, cut_);
    high_ = shard(cut_, layout_.total());
  }

  ModelState shard(size_t begin, size_t end) const {
    ModelState s;
    s.params = full_.params;
    s.shard_begin = begin;
    s.shard_end = end;
    s.m.assign(full_.m.begin() + begin, full_.m.begin() + end);
    s.v.assign(full_.v.begin() + begin, full_.v.begin() + end);
    s.adam_step = full_.adam_step;
    return s;
  }

  // Writes the high shard's part; returns its checksum.
  uint64_t write_high_part() {
    HostStateSnapshot snap(high_);
    return write_moment_part(part_, snap);
  }

  std::string write_file(StateSnapshot& snap, int64_t step) {
    const std::string path = dir_.path() + "/" + "ckpt-0000000" + std::to_string(step) + ".h5";
    const ckpt_format::Meta meta{gpt_attributes(model_), ckpt_test::make_progress(step),
                                 snap.adam_step(), 0};
    create_private_file(path);
    write_checkpoint_streamed(path, gpt_stored_tensors(layout_), meta, snap,
                              StreamOptions{4096 * 2, 2, true});
    return path;
  }

  ScratchDir dir_;
  GptConfig model_ = ckpt_test::tiny_model();
  ParamLayout layout_ = gpt_param_layout(model_);
  ModelState full_, low_, high_;
  size_t cut_ = 0;
  std::string part_ = dir_.path() + "/part";
};

TEST_F(MomentParts, PartNamesAreTemporaries) {
  const std::string p = moment_part_path("/x", 12, 1, 2);
  EXPECT_EQ(p, "/x/.ckpt-00000012.h5.tmp-part1of2");
  EXPECT_TRUE(ckpt_format::is_temp_name(p.substr(3)));
}

TEST_F(MomentParts, LocalShardAndAPartMakeTheWholeFile) {
  const uint64_t hash = write_high_part();
  struct stat st {};
  ASSERT_EQ(stat(part_.c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), 2 * (layout_.total() - cut_) * sizeof(float));
  HostStateSnapshot local(low_);
  PartsSnapshot merged(local, {{"", 0, cut_, 0}, {part_, cut_, layout_.total(), hash}});
  const LoadedCheckpoint got = ckpt_test::read_gpt(write_file(merged, 3), &model_);
  EXPECT_EQ(got.state.params, full_.params);
  EXPECT_EQ(got.state.m, full_.m);
  EXPECT_EQ(got.state.v, full_.v);
}

TEST_F(MomentParts, AChangedPartIsRefused) {
  const uint64_t hash = write_high_part();
  {
    std::fstream f(part_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  HostStateSnapshot local(low_);
  PartsSnapshot merged(local, {{"", 0, cut_, 0}, {part_, cut_, layout_.total(), hash}});
  try {
    write_file(merged, 4);
    FAIL() << "a changed part was merged";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(part_), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("changed"), std::string::npos) << e.what();
  }
}

TEST_F(MomentParts, AShortPartOrABadPartitionIsRefused) {
  const uint64_t hash = write_high_part();
  HostStateSnapshot local(low_);
  std::filesystem::resize_file(part_, 100);
  EXPECT_THROW(PartsSnapshot(local, {{"", 0, cut_, 0}, {part_, cut_, layout_.total(), hash}}),
               std::runtime_error);
  EXPECT_THROW(PartsSnapshot(local, {{"", 0, cut_, 0}}), std::runtime_error);
  EXPECT_THROW(PartsSnapshot(local, {{"", 0, cut_ - 1, 0}, {part_, cut_, layout_.total(), hash}}),
               std::runtime_error);
}

TEST_F(MomentParts, APartReadOutOfOrderIsRefused) {
  const uint64_t hash = write_high_part();
  HostStateSnapshot local(low_);
  PartsSnapshot merged(local, {{"", 0, cut_, 0}, {part_, cut_, layout_.total(), hash}});
  std::vector<float> buf(8);
  EXPECT_THROW(merged.copy_out(StateArray::kV, cut_, 8, buf.data()), std::runtime_error);
  merged.copy_out(StateArray::kM, cut_ - 4, 8, buf.data());  // spans the local shard and the part
  EXPECT_EQ(buf[0], full_.m[cut_ - 4]);
  EXPECT_EQ(buf[7], full_.m[cut_ + 3]);
}

}  // namespace
