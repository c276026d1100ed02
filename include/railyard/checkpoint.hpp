#pragma once
// A directory of HDF5 checkpoints: durable saves (temporary name, fsync, rename, directory
// fsync), keep-last-N, verification on load, and a background writer for periodic saves.
// The file format is documented in docs/checkpoint-format.md. Checkpoints see the model as named
// tensors and attributes (checkpoint_schema.hpp), never as the model itself.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "railyard/checkpoint_schema.hpp"
#include "railyard/state_snapshot.hpp"
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
  double seconds = 0;      // from the call until durable
  bool direct_io = false;  // the tensors bypassed the page cache (O_DIRECT)
};

// Where read_checkpoint's time went, milliseconds (for benchmarks and the resume log).
struct LoadPhases {
  double check_ms = 0;     // the forked structure check (fork, HDF5 parse in the child)
  double open_ms = 0;      // HDF5 open, metadata, small datasets, the tensors' plan, in process
  double allocate_ms = 0;  // sizing the state's arrays (fresh pages, not touched)
  double read_ms = 0;      // pread + XXH3 + value check of the tensors, one pass, many threads
};

struct LoadedCheckpoint {
  std::string path;
  Attributes model;       // the /model attributes, in the schema's order
  StoredTensors tensors;  // what they describe, the layout of `state`
  ModelState state;       // full params and full moments
  TrainProgress progress;
  int64_t format_version = 0;
  double created_unix = 0;  // when the save began
  LoadPhases phases;        // set by read_checkpoint
};

struct CheckpointCheck {
  bool valid = false;
  int64_t step = -1;  // the step the file holds, when valid
  std::string error;  // "<path>: <why not valid>"
};

// Verifies one file as read_checkpoint does, in a forked child process limited in memory and
// time (HDF5 may crash or run away on a damaged file: that becomes "unreadable HDF5 structure"
// here, not a crash of the caller). Never throws for a bad file.
CheckpointCheck check_checkpoint(const std::string& path, const CheckpointSchema& schema,
                                 const Attributes* expect = nullptr);

// Reads and verifies one file (format version, metadata checksum and ranges, the /model
// attributes through `schema` and against `expect` when given, /params against the tensors they
// describe, every dataset's checksum, finite values). What HDF5 parses is read first in a child
// process, as check_checkpoint does; the tensors' bytes, which it does not, are read and verified
// only here, once. Throws CheckpointError naming the file and the problem.
LoadedCheckpoint read_checkpoint(const std::string& path, const CheckpointSchema& schema,
                                 const Attributes* expect = nullptr);

// The checkpoint files of `dir`, newest step first, each fully verified; changes nothing (no
// directory is created, no temporary removed). Empty when `dir` does not exist; throws
// CheckpointError when it exists but cannot be read. Each file is checked in a child process
// (check_checkpoint).
std::vector<CheckpointInfo> list_checkpoints(const std::string& dir,
                                             const CheckpointSchema& schema);

// The rates a save runs at, measured at start for the save-budget warning. The disk: writes
// a probe of `bytes` (rounded to 4096) in `dir` as a save does (O_DIRECT where allowed, then
// fsync) and removes it; bytes/s. Throws std::system_error naming the probe file.
double measure_write_rate(const std::string& dir, size_t bytes);
// The copy out of a snapshot into its staging memory (device to pinned host on a GPU): the
// first `bytes` of params; bytes/s.
double measure_copy_rate(StateSnapshot& snap, size_t bytes);

// The start-of-run warning when a save of `state_bytes` at the slower of the measured rates
// (bytes/s; copy_rate 0: no device copy) would take longer than `budget_s`, naming the rates and
// what to change; "" when it fits.
std::string save_budget_warning(uint64_t state_bytes, double disk_rate, double copy_rate,
                                const std::string& dir, double budget_s);

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
  // error instead of killing the job. `schema` (kept by reference: it must outlive the store)
  // reads files back for pruning, list and load. Throws CheckpointError when `dir` is unusable.
  CheckpointStore(std::string dir, int keep, Communicator& comm, const CheckpointSchema& schema);
  ~CheckpointStore();  // joins a background save (locally; errors are printed, not thrown)

  // Synchronous, collective save of this step; durable when it returns; then prunes to `keep`
  // (never deleting the newest valid checkpoint). Throws CheckpointError on failure, deleting
  // nothing. Waits for a pending background save first (its failure is printed, not thrown).
  // Every rank passes the full params; m and v are either whole on every rank or this rank's
  // shard [shard_begin, shard_end) (the shards partitioning `tensors` in rank order). `model`
  // holds the attributes of /model, of the schema's names and types.
  SaveResult save(const StoredTensors& tensors, const Attributes& model, const ModelState& state,
                  const TrainProgress& progress);
  // The same from a snapshot (state_snapshot.hpp), streamed to the file through pinned
  // staging buffers (a device snapshot is never copied to host memory whole). A ZeRO shard is
  // first copied to the host and gathered, as above.
  SaveResult save(const StoredTensors& tensors, const Attributes& model, StateSnapshot& snapshot,
                  const TrainProgress& progress);
  // Collective: writes the state on background threads. Whole state: rank 0's writes the file.
  // ZeRO shards, where every rank sees the directory (checked at construction): each rank's
  // writer writes its shard into a part file, and rank 0's merges the parts into the file once
  // all are written (agreed in background_finished or wait; docs/checkpoint-format.md); the
  // caller is blocked for two small collectives, nothing is gathered. ZeRO shards elsewhere are
  // gathered to rank 0 now. A previous background save is waited for first (like wait(),
  // rethrowing its error).
  void save_async(const StoredTensors& tensors, const Attributes& model, ModelState state,
                  TrainProgress progress);
  // The same from a snapshot, which the writer threads stream to the file (or a ZeRO shard to
  // its part file); the caller is not blocked for any copy. The ranks that write from it keep
  // `snapshot` until the save is waited for; the others release it at once. A ZeRO shard where
  // not every rank sees the directory is copied to the host and gathered now (slower).
  void save_async(const StoredTensors& tensors, const Attributes& model,
                  std::shared_ptr<StateSnapshot> snapshot, TrainProgress progress);
  // Collective: waits for the background save; on every rank returns its result (if one ran)
  // or throws its CheckpointError.
  std::optional<SaveResult> wait();
  // Collective and cheap (one broadcast while a background save is pending; one all-reduce while
  // ZeRO parts are written, and the boundary where all are written starts rank 0's merge): true
  // when there is no background save or it has finished, so that wait() will not block. Lets
  // the caller report a save at the first step boundary after it became durable.
  bool background_finished();

  // The ModelState handed to the last save_async, once no background save reads it (after
  // wait() on the ranks that write from it, at once on the others), so the caller can snapshot into
  // its already allocated buffers next time instead of faulting in fresh ones; its contents are
  // that snapshot. nullopt when there is none. Not collective.
  std::optional<ModelState> take_spare();

  // Newest first, each fully verified (not collective; any rank may call it).
  std::vector<CheckpointInfo> list() const;
  // Collective: the newest checkpoint that verifies and matches `expect`, read by rank 0 and
  // broadcast; each rejected one is passed to `warn` (on rank 0) with the reason. nullopt when
  // none is usable.
  std::optional<LoadedCheckpoint> load_latest(const Attributes& expect,
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
