#pragma once
// A directory of HDF5 checkpoints: durable saves (temporary name, fsync, rename, directory
// fsync), keep-last-N, verification on load, and a background writer for periodic saves.
// The file format is documented in docs/checkpoint-format.md.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "railyard/gpt_config.hpp"
#include "railyard/param_layout.hpp"
#include "railyard/train_state.hpp"

namespace railyard {

class Communicator;

// A checkpoint that cannot be used; what() says what is wrong with which file.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CheckpointInfo {
  std::string path;
  int64_t step = -1;
  uint64_t bytes = 0;
  double mtime = 0;  // seconds since the epoch
  bool valid = false;
  std::string error;  // why not valid
};

struct SaveResult {
  std::string path;
  uint64_t bytes = 0;
  double seconds = 0;  // from the call until durable
};

struct LoadedCheckpoint {
  std::string path;
  GptConfig model;
  ModelState state;  // full params and full moments
  TrainProgress progress;
  int64_t format_version = 0;
  double created_unix = 0;  // when the save began
};

struct CheckpointCheck {
  bool valid = false;
  int64_t step = -1;  // the step the file holds, when valid
  std::string error;  // "<path>: <why not valid>"
};

// Verifies one file as read_checkpoint does, in a forked child process limited in memory and
// time (HDF5 may crash or run away on a damaged file: that becomes "unreadable HDF5 structure"
// here, not a crash of the caller). Never throws for a bad file.
CheckpointCheck check_checkpoint(const std::string& path, const GptConfig* expect = nullptr);

// Reads and verifies one file (format version, metadata checksum and ranges, /params against
// the /model attributes and `expect` when given, every dataset's checksum, finite values),
// first in a child process (check_checkpoint). Throws CheckpointError naming the file and the
// problem.
LoadedCheckpoint read_checkpoint(const std::string& path, const GptConfig* expect = nullptr);

// The checkpoint files of `dir`, newest step first, each fully verified; changes nothing (no
// directory is created, no temporary removed). Empty when `dir` does not exist; throws
// CheckpointError when it exists but cannot be read. Each file is checked in a child process
// (check_checkpoint).
std::vector<CheckpointInfo> list_checkpoints(const std::string& dir);

// Call first in main, before MPI starts (and before any other HDF5 use): initialises HDF5
// without its shutdown at exit and at MPI_Finalize. HDF5 1.10 crashes (SIGSEGV) in that
// shutdown when a write failed for lack of space or a file-size limit (ulimit -f), turning a
// reported failed save into a crash with exit status 139. Every file railyard writes is closed
// explicitly (and checked) before that point, so the shutdown has nothing to do.
void init_checkpoint_io_before_mpi();

class CheckpointStore {
 public:
  // Collective over comm. Rank 0 creates `dir` (mode 0700) if missing and removes stale
  // temporary files left by a killed writer (one job per directory). `keep` 0 keeps every
  // checkpoint. Ignores SIGXFSZ (if still default) so a file-size limit fails a save with an
  // error instead of killing the job. Throws CheckpointError when `dir` is unusable.
  CheckpointStore(std::string dir, int keep, Communicator& comm);
  ~CheckpointStore();  // joins a background save (locally; errors are printed, not thrown)

  // Synchronous, collective save of this step; durable when it returns; then prunes to `keep`
  // (never deleting the newest valid checkpoint). Throws CheckpointError on failure, deleting
  // nothing. Waits for a pending background save first (its failure is printed, not thrown).
  // Every rank passes the full params; m and v are either whole on every rank or this rank's
  // shard [shard_begin, shard_end) (the shards partitioning the layout in rank order).
  SaveResult save(const ParamLayout& layout, const GptConfig& model, const ModelState& state,
                  const TrainProgress& progress);
  // Collective: gathers the state to the writing rank now, writes it on a background thread
  // of rank 0 (the caller is blocked only for the gather). A previous background save is waited
  // for first (like wait(), rethrowing its error).
  void save_async(const ParamLayout& layout, const GptConfig& model, ModelState state,
                  TrainProgress progress);
  // Collective: waits for the background save; on every rank returns its result (if one ran)
  // or throws its CheckpointError.
  std::optional<SaveResult> wait();
  // Collective and cheap (one broadcast while a background save is pending): true when there is
  // no background save or the writing rank's has finished, so that wait() will not block. Lets
  // the caller report a save at the first step boundary after it became durable.
  bool background_finished();

  // The ModelState handed to the last save_async, once no background save reads it (after
  // wait() on rank 0, at once on the others), so the caller can snapshot into its already
  // allocated buffers next time instead of faulting in fresh ones; its contents are that
  // snapshot. nullopt when there is none. Not collective.
  std::optional<ModelState> take_spare();

  // Newest first, each fully verified (not collective; any rank may call it).
  std::vector<CheckpointInfo> list() const;
  // Collective: the newest checkpoint that verifies and matches `expect`, read by rank 0 and
  // broadcast; each rejected one is passed to `warn` (on rank 0) with the reason. nullopt when
  // none is usable.
  std::optional<LoadedCheckpoint> load_latest(const GptConfig& expect,
                                              const std::function<void(const std::string&)>& warn);

  // Measured write rate of the last save (from creating the file until durable), bytes/s
  // (0 before the first save).
  double write_rate() const;
  const std::string& dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace railyard
