// One checkpoint file: exact round trip, what is stored, and rejection of damaged files.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "checkpoint_test_util.hpp"
#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/gpt_checkpoint.hpp"

using namespace railyard;
using ckpt_test::ScratchDir;

namespace {

class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<CheckpointStore>(dir_.path(), 0, Communicator::world(),
                                               gpt_checkpoint_schema());
    state_ = ckpt_test::make_state(layout_, 0.5f);
    progress_ = ckpt_test::make_progress(12);
    path_ =
        store_->save(gpt_stored_tensors(layout_), gpt_attributes(model_), state_, progress_).path;
  }

  std::string error_of(const GptConfig* expect = nullptr) {
    try {
      ckpt_test::read_gpt(path_, expect);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "no error";
  }

  // File offset of a dataset's raw data (contiguous layout).
  haddr_t data_offset(const char* name) {
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    const haddr_t off = H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    return off;
  }

  void flip_byte(std::streamoff at) {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x20);
    f.seekp(at);
    f.write(&c, 1);
  }

  ScratchDir dir_;
  GptConfig model_ = ckpt_test::tiny_model();
  ParamLayout layout_ = gpt_param_layout(model_);
  std::unique_ptr<CheckpointStore> store_;
  ModelState state_;
  TrainProgress progress_;
  std::string path_;
};

TEST_F(CheckpointFile, RoundTripIsBitExact) {
  EXPECT_EQ(std::filesystem::path(path_).filename(), "ckpt-00000012.h5");
  const LoadedCheckpoint got = ckpt_test::read_gpt(path_, &model_);
  for (const TensorSpec& t : layout_.tensors()) {
    for (size_t i = t.offset; i < t.offset + t.numel; ++i) {
      ASSERT_EQ(std::memcmp(&got.state.params[i], &state_.params[i], 4), 0) << t.name;
      ASSERT_EQ(std::memcmp(&got.state.m[i], &state_.m[i], 4), 0) << t.name;
      ASSERT_EQ(std::memcmp(&got.state.v[i], &state_.v[i], 4), 0) << t.name;
    }
  }
  EXPECT_EQ(got.state.params.size(), layout_.total());
  EXPECT_EQ(got.state.shard_begin, 0u);
  EXPECT_EQ(got.state.shard_end, layout_.total());
  EXPECT_EQ(got.state.adam_step, 17);
  EXPECT_EQ(got.progress.step, 12);
  EXPECT_EQ(got.progress.tokens_seen, progress_.tokens_seen);
  EXPECT_EQ(got.progress.lr, progress_.lr);
  EXPECT_EQ(got.progress.loader.seed, 1234u);
  EXPECT_EQ(got.progress.loader.epoch, 2u);
  EXPECT_EQ(got.progress.loader.cursor, 96u);
  EXPECT_EQ(got.progress.rng_state, progress_.rng_state);
  EXPECT_EQ(got.progress.world_size, 1);
  EXPECT_EQ(got.progress.config_json, progress_.config_json);
  EXPECT_EQ(gpt_config_from(got.model).padded_vocab, 64);
  EXPECT_EQ(gpt_config_from(got.model).dim, 16);
}

TEST_F(CheckpointFile, PrivateModes) {
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(dir_.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(CheckpointFile, FlippedByteInsideADatasetIsRejected) {
  flip_byte(static_cast<std::streamoff>(data_offset("/adam/m/h.1.mlp.fc.weight")) + 101);
  EXPECT_NE(error_of().find("checksum mismatch in dataset /adam/m/h.1.mlp.fc.weight"),
            std::string::npos)
      << error_of();
}

TEST_F(CheckpointFile, TruncatedFileIsRejected) {
  std::filesystem::resize_file(path_, std::filesystem::file_size(path_) / 2);
  EXPECT_NE(error_of().find(path_), std::string::npos);
  EXPECT_NE(error_of(), "no error");
}

TEST_F(CheckpointFile, WrongFormatVersionIsRejected) {
  hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
  const int64_t v = 99;
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  H5Fclose(f);
  EXPECT_NE(error_of().find("format version 99; this railyard reads version 1"), std::string::npos)
      << error_of();
}

TEST_F(CheckpointFile, ChangedMetadataIsRejected) {
  hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t a = H5Aopen(f, "tokens_seen", H5P_DEFAULT);
  const int64_t v = 1;
  H5Awrite(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  H5Fclose(f);
  EXPECT_NE(error_of().find("metadata checksum mismatch"), std::string::npos) << error_of();
}

TEST_F(CheckpointFile, MissingDatasetIsRejected) {
  hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Ldelete(f, "/adam/v/lnf.bias", H5P_DEFAULT);
  H5Fclose(f);
  EXPECT_NE(error_of().find("missing dataset /adam/v/lnf.bias"), std::string::npos) << error_of();
}

TEST_F(CheckpointFile, DifferentModelShapeIsRejected) {
  GptConfig other = model_;
  other.dim = 32;
  other.layers = 3;
  const std::string e = error_of(&other);
  EXPECT_NE(e.find("a different model"), std::string::npos) << e;
  EXPECT_NE(e.find("layers 2 (this run: 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("dim 16 (this run: 32)"), std::string::npos) << e;
}

TEST_F(CheckpointFile, NotAnHdf5FileIsRejected) {
  std::ofstream(path_, std::ios::trunc) << "not a checkpoint";
  EXPECT_NE(error_of().find("not a readable HDF5 file"), std::string::npos) << error_of();
}

// The load reads into arrays whose elements start unset (FloatArray): the alignment padding
// between tensors, which the file does not hold, must still come back as zeros, also when the
// arrays' memory comes from the heap with other contents in it.
TEST(CheckpointLoad, PaddingLoadsAsZerosAndTensorsBitExactInReusedMemory) {
  GptConfig model = ckpt_test::tiny_model();
  model.dim = 12;  // LayerNorm and bias tensors of 12 elements: 4 of padding after each
  model.heads = 2;
  const ParamLayout layout = gpt_param_layout(model);
  std::vector<bool> covered(layout.total(), false);
  for (const TensorSpec& t : layout.tensors()) {
    std::fill(covered.begin() + static_cast<std::ptrdiff_t>(t.offset),
              covered.begin() + static_cast<std::ptrdiff_t>(t.offset + t.numel), true);
  }
  ASSERT_NE(std::count(covered.begin(), covered.end(), false), 0) << "no padding to check";
  ScratchDir dir;
  CheckpointStore store(dir.path(), 0, Communicator::world(), gpt_checkpoint_schema());
  const ModelState saved = ckpt_test::make_state(layout, 0.25f);  // padding non-zero here
  const std::string path = store
                               .save(gpt_stored_tensors(layout), gpt_attributes(model), saved,
                                     ckpt_test::make_progress(3))
                               .path;
  // glibc then fills each block malloc returns with bytes 0xa5 (~0x5a), as reused memory may
  // hold anything; the arrays here are small enough to come from the heap, not fresh pages.
  mallopt(M_PERTURB, 0x5a);
  const LoadedCheckpoint got = ckpt_test::read_gpt(path, &model);
  mallopt(M_PERTURB, 0);
  const float zero = 0.0f;
  for (size_t i = 0; i < layout.total(); ++i) {
    for (auto [a, b] : {std::pair{&got.state.params, &saved.params},
                        std::pair{&got.state.m, &saved.m}, std::pair{&got.state.v, &saved.v}}) {
      ASSERT_EQ(std::memcmp(&(*a)[i], covered[i] ? &(*b)[i] : &zero, 4), 0)
          << "element " << i << (covered[i] ? " (a tensor's)" : " (padding)");
    }
  }
}

}  // namespace
