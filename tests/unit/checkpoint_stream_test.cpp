// The streamed checkpoint write: the chunk pipeline (copy of chunk i+1 overlapping the write of
// chunk i, errors stopping both stages), O_DIRECT writes with their page-cache fallback, the file
// streamed from a snapshot in small chunks, a failing snapshot, the measured save rates, and
// the background save of a snapshot.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "../../runtime/ckpt/streamed_checkpoint.hpp"
#include "checkpoint_test_util.hpp"
#include "railyard/checkpoint.hpp"
#include "railyard/chunk_pipeline.hpp"
#include "railyard/communicator.hpp"
#include "railyard/direct_file.hpp"
#include "railyard/durable_file.hpp"
#include "railyard/gpt_checkpoint.hpp"
#include "railyard/preempt.hpp"
#include "railyard/state_snapshot.hpp"

using namespace railyard;
using ckpt_test::ScratchDir;

namespace {

std::vector<float*> host_buffers(std::vector<std::vector<float>>& mem, size_t n, size_t elems) {
  mem.assign(n, std::vector<float>(elems));
  std::vector<float*> out;
  for (auto& m : mem) out.push_back(m.data());
  return out;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

// A snapshot whose copy_out fails from the `fail_at`-th call on.
class FailingSnapshot final : public StateSnapshot {
 public:
  FailingSnapshot(const ModelState& s, int fail_at) : inner_(s), fail_at_(fail_at) {}
  size_t total() const override { return inner_.total(); }
  size_t shard_begin() const override { return inner_.shard_begin(); }
  size_t shard_end() const override { return inner_.shard_end(); }
  int64_t adam_step() const override { return inner_.adam_step(); }
  void copy_out(StateArray a, size_t begin, size_t count, float* dst) override {
    if (++calls_ >= fail_at_) throw std::runtime_error("device copy failed (test)");
    inner_.copy_out(a, begin, count, dst);
  }

 private:
  HostStateSnapshot inner_;
  int fail_at_;
  int calls_ = 0;
};

}  // namespace

TEST(ChunkPipeline, DrainsEveryChunkInOrderWithTheFillAtMostTheBuffersAhead) {
  std::vector<std::vector<float>> mem;
  const std::vector<float*> bufs = host_buffers(mem, 2, 4);
  std::atomic<int> filled{0}, drained{0}, max_ahead{0};
  std::vector<int> seen;
  run_chunk_pipeline(
      50, bufs,
      [&](size_t i, float* b) {
        const int ahead = static_cast<int>(i) - drained.load();
        max_ahead = std::max(max_ahead.load(), ahead);
        std::fill(b, b + 4, static_cast<float>(i));
        filled = static_cast<int>(i) + 1;
      },
      [&](size_t i, float* b) {
        EXPECT_EQ(b, bufs[i % 2]);
        EXPECT_EQ(b[0], static_cast<float>(i));  // not overwritten by a later fill
        EXPECT_EQ(b[3], static_cast<float>(i));
        seen.push_back(static_cast<int>(i));
        drained = static_cast<int>(i) + 1;
      });
  ASSERT_EQ(seen.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_LE(max_ahead.load(), 2);
}

TEST(ChunkPipeline, AFillErrorStopsBothStagesAndIsRethrown) {
  std::vector<std::vector<float>> mem;
  const std::vector<float*> bufs = host_buffers(mem, 3, 1);
  std::vector<size_t> drained;
  try {
    run_chunk_pipeline(
        20, bufs,
        [&](size_t i, float*) {
          if (i == 5) throw std::runtime_error("copy 5 failed");
        },
        [&](size_t i, float*) { drained.push_back(i); });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "copy 5 failed");
  }
  EXPECT_LE(drained.size(), 5u);
  for (size_t i = 0; i < drained.size(); ++i) EXPECT_EQ(drained[i], i);
}

TEST(ChunkPipeline, ADrainErrorStopsTheFillAndIsRethrown) {
  std::vector<std::vector<float>> mem;
  const std::vector<float*> bufs = host_buffers(mem, 2, 1);
  std::atomic<size_t> fills{0};
  EXPECT_THROW(run_chunk_pipeline(
                   100, bufs, [&](size_t, float*) { ++fills; },
                   [&](size_t i, float*) {
                     if (i == 3) throw std::runtime_error("disk full");
                   }),
               std::runtime_error);
  EXPECT_LE(fills.load(), 3u + 2u + 1u);  // at most the buffers ahead of the failed write
  EXPECT_THROW(run_chunk_pipeline(1, {}, nullptr, nullptr), std::invalid_argument);
}

// Aligned and unaligned offsets and buffers, direct and through the page cache: the bytes land
// exactly where asked, nothing else changes.
TEST(DirectFile, WritesEveryPieceExactlyWithAndWithoutODirect) {
  ScratchDir dir;
  ensure_private_dir(dir.path());
  for (bool direct : {true, false}) {
    const std::string path = dir.path() + (direct ? "/direct" : "/cached");
    create_private_file(path);
    const size_t size = 5 * 4096 + 100;
    std::vector<char> expect(size, 0);
    std::unique_ptr<char, void (*)(void*)> mem(static_cast<char*>(std::aligned_alloc(4096, 16384)),
                                               &std::free);
    for (size_t i = 0; i < 16384; ++i) mem.get()[i] = static_cast<char>(i * 31 + 7);
    {
      DirectFile f(path, direct);
      f.reserve(size);
      struct Piece {
        uint64_t offset;
        size_t src, bytes;
      };
      for (const Piece& p :
           {Piece{0, 0, 8192}, Piece{8192, 0, 4096 + 100}, Piece{4096 * 3 + 100, 100, 4096 + 7},
            Piece{4096 * 4 + 107, 5, 93}, Piece{5 * 4096, 0, 100}}) {
        f.write(p.offset, mem.get() + p.src, p.bytes);
        std::copy(mem.get() + p.src, mem.get() + p.src + p.bytes, expect.begin() + p.offset);
      }
      if (!direct) {
        EXPECT_FALSE(f.direct());
      }
      EXPECT_THROW(DirectFile(dir.path() + "/missing", direct), std::system_error);
    }
    EXPECT_EQ(read_all(path), expect) << (direct ? "O_DIRECT" : "page cache");
  }
}

TEST(StreamedCheckpoint, SmallChunksAndOneBufferGiveTheSameVerifiedFile) {
  ScratchDir dir;
  ensure_private_dir(dir.path());
  const GptConfig c = ckpt_test::tiny_model();
  const ParamLayout layout = gpt_param_layout(c);
  const ModelState st = ckpt_test::make_state(layout, 0.5f);
  const ckpt_format::Meta meta{gpt_attributes(c), ckpt_test::make_progress(9), st.adam_step, 1.7e9};
  size_t numel = 0;  // the layout's padding is not written
  for (const TensorSpec& t : layout.tensors()) numel += t.numel;
  std::vector<std::vector<char>> files;
  for (const StreamOptions& opt : {StreamOptions{4096, 1, true}, StreamOptions{4096, 3, false},
                                   StreamOptions{size_t{1} << 20, 2, true}}) {
    const std::string path = dir.path() + "/ckpt-00000009.h5";
    std::filesystem::remove(path);
    HostStateSnapshot snap(st);
    const StreamStats stats =
        write_checkpoint_streamed(path, gpt_stored_tensors(layout), meta, snap, opt);
    EXPECT_EQ(stats.tensor_bytes, 3 * numel * sizeof(float));
    const LoadedCheckpoint got = ckpt_test::read_gpt(path, &c);
    for (const TensorSpec& t : layout.tensors()) {
      for (size_t i = t.offset; i < t.offset + t.numel; ++i) {
        ASSERT_EQ(got.state.params[i], st.params[i]) << t.name;
        ASSERT_EQ(got.state.m[i], st.m[i]) << t.name;
        ASSERT_EQ(got.state.v[i], st.v[i]) << t.name;
      }
    }
    EXPECT_EQ(got.state.adam_step, st.adam_step);
    files.push_back(read_all(path));
  }
  // Same metadata, same bytes, whatever the chunking.
  EXPECT_EQ(files[0], files[1]);
  EXPECT_EQ(files[0], files[2]);
}

TEST(StreamedCheckpoint, AFailedCopyFailsTheSaveAndLeavesNoFile) {
  ScratchDir dir;
  Communicator& comm = Communicator::world();
  const GptConfig c = ckpt_test::tiny_model();
  const ParamLayout layout = gpt_param_layout(c);
  const ModelState st = ckpt_test::make_state(layout, 1.0f);
  CheckpointStore store(dir.path(), 2, comm, gpt_checkpoint_schema());
  store.save(gpt_stored_tensors(layout), gpt_attributes(c), st, ckpt_test::make_progress(1));
  FailingSnapshot bad(st, 10);
  try {
    store.save(gpt_stored_tensors(layout), gpt_attributes(c), bad, ckpt_test::make_progress(2));
    FAIL() << "no exception";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("device copy failed (test)"), std::string::npos)
        << e.what();
  }
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "ckpt-00000001.h5");
  }
  EXPECT_EQ(entries, 1u);
}

TEST(StreamedCheckpoint, ABackgroundSaveOfASnapshotHoldsItUntilWaitedFor) {
  ScratchDir dir;
  Communicator& comm = Communicator::world();
  const GptConfig c = ckpt_test::tiny_model();
  const ParamLayout layout = gpt_param_layout(c);
  const ModelState st = ckpt_test::make_state(layout, 2.0f);
  CheckpointStore store(dir.path(), 2, comm, gpt_checkpoint_schema());
  auto snap = std::make_shared<HostStateSnapshot>(st);
  std::weak_ptr<StateSnapshot> watch = snap;
  store.save_async(gpt_stored_tensors(layout), gpt_attributes(c), std::move(snap),
                   ckpt_test::make_progress(4));
  EXPECT_FALSE(watch.expired());  // the writer reads it
  const auto r = store.wait();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(store.background_finished());
  EXPECT_TRUE(watch.expired());
  const LoadedCheckpoint got = ckpt_test::read_gpt(r->path, &c);
  EXPECT_EQ(got.state.params, st.params);
  EXPECT_EQ(got.progress.step, 4);
}

TEST(SaveRates, AreMeasuredAndLeaveNoProbe) {
  ScratchDir dir;
  ensure_private_dir(dir.path());
  EXPECT_GT(measure_write_rate(dir.path(), 1 << 20), 0);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/.railyard-write-probe"));
  const ParamLayout layout = gpt_param_layout(ckpt_test::tiny_model());
  HostStateSnapshot snap(ckpt_test::make_state(layout, 0.0f));
  EXPECT_GT(measure_copy_rate(snap, 1 << 20), 0);
  EXPECT_THROW(measure_write_rate(dir.path() + "/missing", 4096), std::system_error);
}

TEST(SaveRates, TheBudgetWarningUsesTheSlowerRate) {
  // 1.5 GB: 1 s at 1.5 GB/s from the disk, but 3 s at 0.5 GB/s out of the device.
  EXPECT_EQ(save_budget_warning(1500000000, 1.5e9, 0, "ck", 2.0), "");
  const std::string w = save_budget_warning(1500000000, 1.5e9, 0.5e9, "ck", 2.0);
  EXPECT_NE(w.find("takes about 3.0 s at the measured 1500.0 MB/s of 'ck' and 500.0 MB/s out "
                   "of the device, more than --save-budget 2.0 s"),
            std::string::npos)
      << w;
  EXPECT_NE(save_budget_warning(1500000000, 0.5e9, 0, "ck", 2.0).find("about 3.0 s"),
            std::string::npos);
}

TEST(SignalTime, TheFirstWatchedSignalIsTimedOnTheSteadyClock) {
  SignalWatcher w("USR2=exit");
  EXPECT_EQ(w.first_signal_time(), 0);
  const double before =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  raise(SIGUSR2);
  const double first = w.first_signal_time();
  const double after =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  EXPECT_GE(first, before);
  EXPECT_LE(first, after);
  raise(SIGUSR2);
  EXPECT_EQ(w.first_signal_time(), first);  // the first one counts
}
