#pragma once
// A background save of ZeRO-1 moment shards without collectives off the training thread: each
// rank other than 0 writes its shard of m and v into a part file of its own (raw float32, m then
// v, its XXH3-64 kept), on its writer thread; once every rank's part is written (agreed on the
// training thread), rank 0's writer streams the one checkpoint file from its own state and the
// parts (docs/checkpoint-format.md, "Background saves of sharded moments"). Parts carry temporary
// names, so a kill at any point leaves them to the next start's cleanup and no new checkpoint.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "railyard/state_snapshot.hpp"

namespace railyard {

// The part file of `rank` for the save of `step` in `dir`: ".ckpt-<step>.h5.tmp-part<rank>of<n>".
std::string moment_part_path(const std::string& dir, int64_t step, int rank, int ranks);

// Writes m then v of the snapshot's shard into a new private file at `path` (replacing a stale
// one), streamed through the snapshot's staging buffers; returns the XXH3-64 of the bytes
// written. Throws std::system_error or std::runtime_error naming the file.
uint64_t write_moment_part(const std::string& path, StateSnapshot& snap);

// One rank's part as rank 0 reads it back: its shard [begin, end) and the checksum it reported.
struct MomentPart {
  std::string path;  // "" for rank 0's own shard, read from the local snapshot
  size_t begin = 0, end = 0;
  uint64_t xxh3 = 0;
};

// Rank 0's view of the whole state for its writer: params and its own shard from `local`, the
// other shards from their part files. The checkpoint writer reads every array in order, so each
// part is read once, front to back, and its checksum is compared when its last byte is read
// (a part read out of order, short, or with other bytes throws std::runtime_error naming it).
class PartsSnapshot final : public StateSnapshot {
 public:
  PartsSnapshot(StateSnapshot& local, std::vector<MomentPart> parts);
  ~PartsSnapshot() override;

  size_t total() const override { return local_.total(); }
  size_t shard_begin() const override { return 0; }
  size_t shard_end() const override { return local_.total(); }
  int64_t adam_step() const override { return local_.adam_step(); }
  void copy_out(StateArray array, size_t begin, size_t count, float* dst) override;
  std::vector<float*> staging(size_t n, size_t bytes) override { return local_.staging(n, bytes); }

 private:
  struct Reader;
  void read_part(size_t part, StateArray array, size_t begin, size_t count, float* dst);

  StateSnapshot& local_;
  std::vector<MomentPart> parts_;
  std::vector<std::unique_ptr<Reader>> readers_;  // one per part, null for the local shard
};

}  // namespace railyard
