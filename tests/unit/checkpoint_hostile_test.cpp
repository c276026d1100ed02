// Checkpoints that are damaged or hostile: absurd values under consistent checksums, metadata
// whose high bits changed, shapes that disagree with /model, oversized declarations, non-finite
// state, and readers that crash or run away (isolated in a child process).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <vector>

#include "../../runtime/ckpt/checkpoint_format.hpp"
#include "../../runtime/ckpt/isolated_read.hpp"
#include "checkpoint_test_util.hpp"
#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/gpt_checkpoint.hpp"

using namespace railyard;
using ckpt_test::ScratchDir;

namespace {

int64_t get_i64(hid_t obj, const char* name) {
  int64_t v = 0;
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  return v;
}

template <typename T>
void put(hid_t obj, const char* name, hid_t mem, T v) {
  hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
  ASSERT_GE(H5Awrite(a, mem, &v), 0) << name;
  H5Aclose(a);
}

// The /model attribute `name` of a stored record (the GPT's are all int64).
int64_t& model_attr(ckpt_format::StoredMeta& m, const std::string& name) {
  for (Attribute& a : m.model) {
    if (a.name == name) return std::get<int64_t>(a.value);
  }
  throw std::out_of_range("no /model attribute " + name);
}

// The stored metadata of a file, as the writer packed it.
ckpt_format::StoredMeta stored(hid_t f) {
  ckpt_format::StoredMeta m;
  m.step = get_i64(f, "step");
  m.tokens_seen = get_i64(f, "tokens_seen");
  m.adam_step = get_i64(f, "adam_step");
  m.world_size = get_i64(f, "world_size");
  hid_t a = H5Aopen(f, "lr", H5P_DEFAULT);
  H5Aread(a, H5T_NATIVE_DOUBLE, &m.lr);
  H5Aclose(a);
  for (auto [name, field] :
       {std::pair{"loader_seed", &m.loader_seed}, std::pair{"loader_epoch", &m.loader_epoch},
        std::pair{"loader_cursor", &m.loader_cursor}}) {
    a = H5Aopen(f, name, H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_UINT64, field);
    H5Aclose(a);
  }
  hid_t g = H5Gopen2(f, "model", H5P_DEFAULT);
  for (const GptConfigField& field : kGptConfigFields) {
    m.model.push_back({field.name, get_i64(g, field.name)});
  }
  H5Gclose(g);
  return m;
}

// Writes `m` over the file's attributes; with `rehash` also a matching metadata checksum (a
// file whose checksums are consistent but whose values are absurd).
void rewrite(const std::string& path, const ckpt_format::StoredMeta& m, bool rehash) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  put(f, "step", H5T_NATIVE_INT64, m.step);
  put(f, "tokens_seen", H5T_NATIVE_INT64, m.tokens_seen);
  put(f, "adam_step", H5T_NATIVE_INT64, m.adam_step);
  put(f, "world_size", H5T_NATIVE_INT64, m.world_size);
  put(f, "lr", H5T_NATIVE_DOUBLE, m.lr);
  put(f, "loader_epoch", H5T_NATIVE_UINT64, m.loader_epoch);
  hid_t g = H5Gopen2(f, "model", H5P_DEFAULT);
  for (const Attribute& a : m.model) {
    put(g, a.name.c_str(), H5T_NATIVE_INT64, std::get<int64_t>(a.value));
  }
  H5Gclose(g);
  if (rehash) {
    put(f, ckpt_format::kMetaChecksumAttr, H5T_NATIVE_UINT64,
        ckpt_format::meta_checksum(m, ckpt_format::kVersion));
  }
  H5Fclose(f);
}

class HostileCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<CheckpointStore>(dir_.path(), 0, Communicator::world(),
                                               gpt_checkpoint_schema());
    state_ = ckpt_test::make_state(layout_, 0.5f);
    path_ = store_
                ->save(gpt_stored_tensors(layout_), gpt_attributes(model_), state_,
                       ckpt_test::make_progress(12))
                .path;
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    meta_ = stored(f);
    H5Fclose(f);
  }

  std::string error_of() {
    try {
      ckpt_test::read_gpt(path_);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "no error";
  }

  // Saves `state` as step 13 and returns that file's error.
  std::string error_of_state(const ModelState& state) {
    path_ = store_
                ->save(gpt_stored_tensors(layout_), gpt_attributes(model_), state,
                       ckpt_test::make_progress(13))
                .path;
    return error_of();
  }

  ScratchDir dir_;
  GptConfig model_ = ckpt_test::tiny_model();
  ParamLayout layout_ = gpt_param_layout(model_);
  std::unique_ptr<CheckpointStore> store_;
  ModelState state_;
  std::string path_;
  ckpt_format::StoredMeta meta_;
};

TEST_F(HostileCheckpoint, AbsurdValuesUnderAConsistentChecksumAreRejected) {
  struct Case {
    const char* field;
    std::function<void(ckpt_format::StoredMeta&)> set;
  };
  const std::vector<Case> cases = {
      {"attribute step", [](auto& m) { m.step = -5; }},
      {"attribute tokens_seen", [](auto& m) { m.tokens_seen = -1; }},
      {"attribute adam_step", [](auto& m) { m.adam_step = -2; }},
      {"attribute world_size", [](auto& m) { m.world_size = -3; }},
      {"attribute world_size", [](auto& m) { m.world_size = 0; }},
      {"attribute lr", [](auto& m) { m.lr = std::numeric_limits<double>::quiet_NaN(); }},
      {"attribute lr", [](auto& m) { m.lr = -1e-3; }},
      {"attribute loader_epoch", [](auto& m) { m.loader_epoch = UINT64_MAX; }},
      {"/model attributes: dim is", [](auto& m) { model_attr(m, "dim") = int64_t{1} << 40; }},
      {"/model attributes: layers is", [](auto& m) { model_attr(m, "layers") = -1; }},
  };
  for (const Case& c : cases) {
    ckpt_format::StoredMeta m = meta_;
    c.set(m);
    rewrite(path_, m, true);
    const std::string e = error_of();
    EXPECT_NE(e.find(c.field), std::string::npos) << c.field << ": " << e;
    EXPECT_NE(e.find("outside"), std::string::npos) << e;
  }
}

TEST_F(HostileCheckpoint, MetadataChecksumCoversTheHigh32BitsOfInt64Attributes) {
  for (int which = 0; which < 2; ++which) {
    ckpt_format::StoredMeta m = meta_;
    (which == 0 ? m.world_size : model_attr(m, "vocab")) += int64_t{1} << 32;  // same low 32 bits
    rewrite(path_, m, false);
    EXPECT_NE(error_of().find("metadata checksum mismatch"), std::string::npos) << error_of();
  }
}

TEST_F(HostileCheckpoint, ShapesAreCheckedAgainstTheModelAttributes) {
  // /model says dim 8, the tensors are dim 16: inspect and export size buffers from /model.
  ckpt_format::StoredMeta m = meta_;
  model_attr(m, "dim") = 8;
  rewrite(path_, m, true);
  const std::string e = error_of();
  EXPECT_NE(e.find("/params/wte has shape [64, 16], the /model attributes give [64, 8]"),
            std::string::npos)
      << e;
}

TEST_F(HostileCheckpoint, ModelLargerThanTheFileIsRefusedBeforeAllocating) {
  ckpt_format::StoredMeta m = meta_;
  model_attr(m, "vocab") = model_attr(m, "padded_vocab") =
      int64_t{1} << 30;  // 12 GiB of state in a file of kilobytes
  rewrite(path_, m, true);
  const std::string e = error_of();
  EXPECT_NE(e.find("but the file holds only"), std::string::npos) << e;
}

TEST_F(HostileCheckpoint, OversizedSmallDatasetIsRefusedBeforeAllocating) {
  // An empty chunked rng_state declaring 2^28 words (2 GiB if allocated).
  hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Ldelete(f, "rng_state", H5P_DEFAULT), 0);
  const hsize_t dims[1] = {hsize_t{1} << 28}, chunk[1] = {1024};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 1, chunk);
  hid_t d = H5Dcreate2(f, "rng_state", H5T_STD_U64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(d, 0);
  H5Dclose(d);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(f);
  const std::string e = error_of();
  EXPECT_NE(e.find("dataset /rng_state declares 268435456 elements"), std::string::npos) << e;
}

TEST_F(HostileCheckpoint, NonFiniteOrNegativeSecondMomentIsRejected) {
  ModelState s = state_;
  s.params[layout_.at("h.1.mlp.fc.weight").offset + 3] = std::numeric_limits<float>::infinity();
  std::string e = error_of_state(s);
  EXPECT_NE(e.find("dataset /params/h.1.mlp.fc.weight holds inf"), std::string::npos) << e;
  s = state_;
  s.m[7] = std::numeric_limits<float>::quiet_NaN();
  e = error_of_state(s);
  EXPECT_NE(e.find("dataset /adam/m/wte holds nan"), std::string::npos) << e;
  s = state_;
  s.v[layout_.at("lnf.bias").offset] = -1.0f;
  e = error_of_state(s);
  EXPECT_NE(e.find("dataset /adam/v/lnf.bias holds -1"), std::string::npos) << e;
  EXPECT_NE(e.find(">= 0"), std::string::npos) << e;
}

// Tensors larger than the reader's 1 MiB chunks: values are checked chunk by chunk as they are
// read (checkpoint_reader.cpp), the message still naming the element's index in the tensor.
class LargeTensorCheckpoint : public ::testing::Test {
 protected:
  static GptConfig model() {
    GptConfig c = ckpt_test::tiny_model();
    c.vocab = c.padded_vocab = 4096;  // wte: 4096 x 128 floats, 2 MiB
    c.dim = 128;
    c.heads = 2;
    c.layers = 1;
    return c;
  }
  std::string error_of(const ModelState& s, std::string* path = nullptr) {
    const std::string p = store_
                              .save(gpt_stored_tensors(layout_), gpt_attributes(model_), s,
                                    ckpt_test::make_progress(5))
                              .path;
    if (path != nullptr) *path = p;
    return error_after_save(p);
  }
  static std::string error_after_save(const std::string& p) {
    try {
      read_checkpoint(p, gpt_checkpoint_schema());
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "no error";
  }

  ScratchDir dir_;
  GptConfig model_ = model();
  ParamLayout layout_ = gpt_param_layout(model_);
  CheckpointStore store_{dir_.path(), 0, Communicator::world(), gpt_checkpoint_schema()};
  ModelState state_ = ckpt_test::make_state(layout_, 0.25f);
};

TEST_F(LargeTensorCheckpoint, ABadValuePastTheFirstChunkIsNamedByItsIndexInTheTensor) {
  ASSERT_GT(layout_.at("wte").numel * 4, size_t{1} << 20);
  EXPECT_EQ(error_of(state_), "no error");
  ModelState s = state_;
  s.m[layout_.at("wte").offset + 400000] = std::numeric_limits<float>::quiet_NaN();
  const std::string e = error_of(s);
  EXPECT_NE(e.find("dataset /adam/m/wte holds nan at element 400000"), std::string::npos) << e;
}

// Damage that turns values into NaN is reported as damage (the checksum), not as a diverged
// state, though the value check sees those bytes first.
TEST_F(LargeTensorCheckpoint, DamagedTensorBytesAreAChecksumMismatch) {
  std::string path;
  ASSERT_EQ(error_of(state_, &path), "no error");
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t d = H5Dopen2(f, "params/wte", H5P_DEFAULT);
  const haddr_t at = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  ASSERT_NE(at, HADDR_UNDEF);
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(at + (size_t{3} << 20) / 2));
    const char nan[4] = {'\xff', '\xff', '\xff', '\xff'};
    io.write(nan, sizeof nan);
  }
  const std::string e = error_after_save(path);
  EXPECT_NE(e.find("checksum mismatch in dataset /params/wte"), std::string::npos) << e;
  EXPECT_FALSE(check_checkpoint(path, gpt_checkpoint_schema()).valid);
}

// Where HDF5 says a contiguous tensor lies: the structure check (in the child) rejects an
// offset that a damaged layout message moved onto another tensor or past the end of the file,
// before any tensor byte is read.
TEST_F(LargeTensorCheckpoint, ATensorLaidOverAnotherOrPastTheEndIsRejected) {
  std::string path;
  ASSERT_EQ(error_of(state_, &path), "no error");
  auto where = [&](const char* name) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    const std::pair<uint64_t, uint64_t> at{H5Dget_offset(d), H5Dget_storage_size(d)};
    H5Dclose(d);
    H5Fclose(f);
    return at;
  };
  const auto [wte, bytes] = where("params/wte");
  const uint64_t wpe = where("params/wpe").first;
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), {});
  // The contiguous layout message (version 3, class 1): its address, then its size.
  std::string message("\x03\x01", 2);
  for (uint64_t v : {wte, bytes}) message.append(reinterpret_cast<const char*>(&v), 8);
  const size_t at = file.find(message);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(file.find(message, at + 1), std::string::npos);
  auto error_with_address = [&](uint64_t address) {
    std::string damaged = file;
    damaged.replace(at + 2, 8, reinterpret_cast<const char*>(&address), 8);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << damaged;
    return error_after_save(path);
  };
  std::string e = error_with_address(wpe);
  EXPECT_NE(e.find("overlap in the file"), std::string::npos) << e;
  e = error_with_address(file.size() - bytes / 2);
  EXPECT_NE(e.find("/params/wte lies at bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("past the end of the file"), std::string::npos) << e;
}

TEST(IsolatedRead, ACrashingReaderIsAFailedCheckNotACrash) {
  const isolated::Outcome r = isolated::run(1000, []() -> int64_t {
    raise(SIGSEGV);
    return 0;
  });
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("unreadable HDF5 structure"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("SIGSEGV"), std::string::npos) << r.error;
}

TEST(IsolatedRead, AReaderThatAllocatesWithoutBoundHitsTheMemoryLimit) {
  const isolated::Outcome r = isolated::run(1000, []() -> int64_t {
    std::vector<std::vector<char>> hog;
    while (true) hog.emplace_back(size_t{64} << 20, 'x');
  });
  EXPECT_FALSE(r.ok);
#if defined(__SANITIZE_ADDRESS__)
  // The sanitizer's allocator exits at the limit instead of throwing std::bad_alloc.
  EXPECT_NE(r.error.find("unreadable HDF5 structure"), std::string::npos) << r.error;
#else
  EXPECT_NE(r.error.find("needed more than the 512 MiB"), std::string::npos) << r.error;
#endif
}

TEST(IsolatedRead, ResultAndMessagesComeBack) {
  isolated::Outcome r = isolated::run(1000, [] { return int64_t{42}; });
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.step, 42);
  r = isolated::run(1000, []() -> int64_t { throw std::runtime_error("bad thing"); });
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "bad thing");
}

}  // namespace

namespace {

TEST(CheckpointRetention, KeepCountsValidCheckpointsOnly) {
  ScratchDir dir;
  const GptConfig model = ckpt_test::tiny_model();
  const ParamLayout layout = gpt_param_layout(model);
  CheckpointStore store(dir.path(), 2, Communicator::world(), gpt_checkpoint_schema());
  const ModelState state = ckpt_test::make_state(layout, 0.5f);
  const std::string four = store
                               .save(gpt_stored_tensors(layout), gpt_attributes(model), state,
                                     ckpt_test::make_progress(4))
                               .path;
  const std::string five = store
                               .save(gpt_stored_tensors(layout), gpt_attributes(model), state,
                                     ckpt_test::make_progress(5))
                               .path;
  std::filesystem::resize_file(five, std::filesystem::file_size(five) / 2);  // damaged
  const std::string six = dir.path() + "/ckpt-00000006.h5";
  std::ofstream(six).flush();  // empty
  store.save(gpt_stored_tensors(layout), gpt_attributes(model), state, ckpt_test::make_progress(7));
  // 7 and 4 are the two newest valid ones: 4 must survive; damaged files do not count.
  EXPECT_TRUE(std::filesystem::exists(four));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/ckpt-00000007.h5"));
  const std::vector<CheckpointInfo> infos = list_checkpoints(dir.path(), gpt_checkpoint_schema());
  ASSERT_EQ(infos.size(), 4u);
  EXPECT_FALSE(infos[1].valid);
  EXPECT_FALSE(infos[2].valid);
  // One more save: now 8 and 7 are kept, the older valid 4 goes, the damaged ones stay
  // reported (they are never counted, never preferred).
  store.save(gpt_stored_tensors(layout), gpt_attributes(model), state, ckpt_test::make_progress(8));
  EXPECT_FALSE(std::filesystem::exists(four));
}

TEST(CheckpointDirectory, AnUnreadableDirectoryIsAnErrorNotNoCheckpoints) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.path());
  const std::string not_a_dir = dir.path() + "/file";
  std::ofstream(not_a_dir) << "x";
  try {
    list_checkpoints(not_a_dir, gpt_checkpoint_schema());
    ADD_FAILURE() << "listing a non-directory succeeded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read checkpoint directory " + not_a_dir),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(list_checkpoints(dir.path() + "/missing", gpt_checkpoint_schema())
                  .empty());  // absent: nothing saved yet
  if (geteuid() == 0) GTEST_SKIP() << "root reads directories without permission";
  const std::string closed = dir.path() + "/closed";
  std::filesystem::create_directories(closed);
  chmod(closed.c_str(), 0);
  EXPECT_THROW(list_checkpoints(closed, gpt_checkpoint_schema()), CheckpointError);
  chmod(closed.c_str(), 0700);
}

}  // namespace
