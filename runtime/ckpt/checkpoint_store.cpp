#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <utility>

#include "background_writer.hpp"
#include "checkpoint_format.hpp"
#include "checkpoint_writer.hpp"
#include "collective_error.hpp"
#include "hdf5_handle.hpp"
#include "moment_parts.hpp"
#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/durable_file.hpp"
#include "railyard/state_snapshot.hpp"
#include "streamed_checkpoint.hpp"

namespace railyard {
namespace {

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double now_mono() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Entry {
  std::string name;
  int64_t step;
};

// Checkpoint files (by name) in `dir`, newest step first; symlinks are included so list() can
// report them, the writer and pruning skip them.
// A directory that exists but cannot be read is an error: "no checkpoints" would make a resume
// start from step 0 over checkpoints it could not see.
std::vector<Entry> scan(const std::string& dir) {
  std::vector<Entry> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    throw CheckpointError("cannot read checkpoint directory " + dir + ": " + std::strerror(errno) +
                          " (check the path and its permissions; nothing was resumed or pruned)");
  }
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (auto step = ckpt_format::step_of(name)) out.push_back({name, *step});
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return a.step != b.step ? a.step > b.step : a.name > b.name;
  });
  return out;
}

bool is_regular_nolink(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void remove_stale_temps(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* e = readdir(d)) {
    if (ckpt_format::is_temp_name(e->d_name)) stale.push_back(dir + "/" + e->d_name);
  }
  closedir(d);
  for (const std::string& p : stale) {
    if (is_regular_nolink(p)) remove_file(p);
  }
}

// Which checkpoint files are known to verify, so pruning after every save does not re-read
// them: a file is checked (in a child process) once per size and modification time; files this
// process wrote or resumed from are known valid.
class Validity {
 public:
  explicit Validity(const CheckpointSchema& schema) : schema_(schema) {}
  void known_valid(const std::string& path) { seen_[path] = {stamp(path), true}; }
  bool valid(const std::string& path) {
    const auto now = stamp(path);
    const auto it = seen_.find(path);
    if (it != seen_.end() && it->second.first == now) return it->second.second;
    const bool ok = check_checkpoint(path, schema_).valid;
    seen_[path] = {now, ok};
    return ok;
  }

 private:
  using Stamp = std::pair<int64_t, int64_t>;  // size, mtime in ns
  static Stamp stamp(const std::string& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return {-1, -1};
    return {st.st_size, st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
  }
  const CheckpointSchema& schema_;
  std::map<std::string, std::pair<Stamp, bool>> seen_;
};

// Keeps the `keep` newest valid checkpoints at or below `saved_step` (the one just made durable
// among them); older ones go. Damaged files do not count toward `keep`, so they never push out
// the last valid one; they stay (reported by list) unless older than the kept ones. Newer files
// than the save (left from another history) are not touched, so a resume that skipped a damaged
// newer file never loses the checkpoint it resumed from.
void prune(const std::string& dir, int keep, int64_t saved_step, Validity& validity) {
  if (keep <= 0) return;
  int kept = 0;
  for (const Entry& e : scan(dir)) {
    if (e.step > saved_step) continue;
    const std::string path = dir + "/" + e.name;
    if (!is_regular_nolink(path)) continue;
    if (kept < keep) {
      if (validity.valid(path)) ++kept;
      continue;
    }
    remove_file(path);
  }
}

uint64_t file_bytes(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// An upper-bound-ish estimate, to refuse early when the filesystem cannot hold the file.
uint64_t estimate_bytes(const StoredTensors& layout, const TrainProgress& p) {
  uint64_t elems = 0;
  for (const StoredTensor& t : layout.tensors) elems += t.numel;
  return 3 * elems * sizeof(float) + p.config_json.size() + 8 * p.rng_state.size() +
         2048 * (3 * layout.tensors.size() + 16);
}

struct Ranges {
  std::vector<uint64_t> begin, end;
  bool replicated = true;  // every rank holds the whole state (no ZeRO)
};

std::string check_local(const StoredTensors& layout, const ModelState& s) {
  if (s.params.size() != layout.total) {
    return "params hold " + std::to_string(s.params.size()) + " elements, the layout " +
           std::to_string(layout.total);
  }
  if (s.shard_begin > s.shard_end || s.shard_end > layout.total ||
      s.m.size() != s.shard_end - s.shard_begin || s.v.size() != s.m.size()) {
    return "moments do not match their shard [" + std::to_string(s.shard_begin) + ", " +
           std::to_string(s.shard_end) + ") (m " + std::to_string(s.m.size()) + ", v " +
           std::to_string(s.v.size()) + " elements)";
  }
  return "";
}

Ranges exchange_ranges(Communicator& comm, uint64_t shard_begin, uint64_t shard_end, size_t total) {
  const int n = comm.size();
  const std::vector<uint64_t> all = comm.allgather({shard_begin, shard_end});
  Ranges r;
  for (int q = 0; q < n; ++q) {
    r.begin.push_back(all[2 * q]);
    r.end.push_back(all[2 * q + 1]);
    if (r.begin.back() != 0 || r.end.back() != total) r.replicated = false;
  }
  if (r.replicated) return r;
  for (int q = 0; q < n; ++q) {
    const uint64_t expect_begin = q == 0 ? 0 : r.end[q - 1];
    if (r.begin[q] != expect_begin || (q == n - 1 && r.end[q] != total)) {
      throw std::runtime_error("the ranks' moment shards do not partition [0, " +
                               std::to_string(total) + ") in rank order (rank " +
                               std::to_string(q) + " holds [" + std::to_string(r.begin[q]) + ", " +
                               std::to_string(r.end[q]) + "))");
    }
  }
  return r;
}

// The messages of the moment shards sent to rank 0 (the communicator is railyard's own, so no
// other library's message can match it).
constexpr int kShardTag = 77;

// Rank 0 receives every shard of `mine` into `full`; the others send theirs.
void gather_to_root(Communicator& comm, const Ranges& r, const FloatArray& mine, FloatArray& full,
                    size_t total) {
  if (comm.rank() == 0) {
    full.assign(total, 0.0f);
    std::copy(mine.begin(), mine.end(), full.begin() + static_cast<std::ptrdiff_t>(r.begin[0]));
    for (int q = 1; q < comm.size(); ++q) {
      comm.recv(full.data() + r.begin[q], (r.end[q] - r.begin[q]) * sizeof(float), q, kShardTag);
    }
  } else {
    comm.send(mine.data(), mine.size() * sizeof(float), 0, kShardTag);
  }
}

// `v`: a std::vector of trivially copyable elements (any allocator).
template <typename Vector>
void bcast_vec(Communicator& comm, Vector& v) {
  uint64_t n = v.size();
  comm.broadcast(&n, sizeof n, 0);
  v.resize(n);
  if (n > 0) comm.broadcast(v.data(), n * sizeof(typename Vector::value_type), 0);
}

template <typename T>
void bcast_pod(Communicator& comm, T& v) {
  comm.broadcast(&v, sizeof v, 0);
}

// The /model attributes (every rank holds the schema, so only the values travel).
void bcast_attributes(Communicator& comm, Attributes& attrs, const CheckpointSchema& schema) {
  attrs.resize(schema.attribute_types().size());
  for (size_t i = 0; i < attrs.size(); ++i) {
    Attribute& a = attrs[i];
    if (comm.rank() != 0) a = schema.attribute_types()[i];
    if (auto* n = std::get_if<int64_t>(&a.value)) {
      bcast_pod(comm, *n);
    } else if (auto* d = std::get_if<double>(&a.value)) {
      bcast_pod(comm, *d);
    } else {
      broadcast_string(comm, std::get<std::string>(a.value), 0);
    }
  }
}

void bcast_progress(Communicator& comm, TrainProgress& p) {
  bcast_pod(comm, p.step);
  bcast_pod(comm, p.tokens_seen);
  bcast_pod(comm, p.lr);
  bcast_pod(comm, p.loader);
  bcast_pod(comm, p.world_size);
  bcast_vec(comm, p.rng_state);
  broadcast_string(comm, p.config_json, 0);
}

// Collective: whether every rank sees the files rank 0 creates in `dir` (one filesystem for the
// job, or ranks on one node), which background saves of ZeRO shards need (moment_parts.hpp).
// False too when rank 0 cannot create the probe (a read-only directory): saves then fail with
// their own reasons, as they did before the probe.
bool every_rank_sees(Communicator& comm, const std::string& dir) {
  long pid = static_cast<long>(getpid());
  comm.broadcast(&pid, sizeof pid, 0);
  const std::string probe =
      dir + "/." + ckpt_format::file_name(0) + ".tmp-probe" + std::to_string(pid);
  int created = 0;
  if (comm.rank() == 0) {
    try {
      remove_file(probe);
      create_private_file(probe);
      created = 1;
    } catch (const std::exception&) {
      created = 0;
    }
  }
  comm.broadcast(&created, sizeof created, 0);
  if (created == 0) return false;
  const int64_t sees = access(probe.c_str(), F_OK) == 0 ? 1 : 0;
  const bool all = comm.allreduce_min(sees) == 1;
  if (comm.rank() == 0) remove_file(probe);
  return all;
}

}  // namespace

struct CheckpointStore::Impl {
  std::string dir;
  int keep;
  Communicator& comm;
  const CheckpointSchema& schema;
  BackgroundWriter background;  // rank 0 only
  bool async_pending = false;   // on every rank, so wait() stays collective
  // The snapshot of the background save (rank 0, owned here while the writer reads it) and, once
  // no save needs it, its buffers for take_spare().
  std::unique_ptr<ModelState> in_flight;
  std::shared_ptr<StateSnapshot> in_flight_snapshot;  // what the writer reads (rank 0)
  std::optional<ModelState> spare;
  std::atomic<double> rate{0};  // set by the background writer, read by the caller
  Validity validity;            // rank 0, caller's thread only

  // A background save of ZeRO shards through part files (moment_parts.hpp): every rank's writer
  // writes its part (kParts); once all have, agreed on the training thread, rank 0's writer
  // merges them into the checkpoint file (kMerge). Only where every rank sees `dir`.
  bool shared_dir = false;
  enum class Phase { kNone, kParts, kMerge } phase = Phase::kNone;
  struct PartsSave {
    StoredTensors layout;
    ckpt_format::Meta meta;
    Ranges ranges;
    double t_start = 0;
    std::string context;
    std::string error;  // the parts' failure, the same on every rank
  };
  std::optional<PartsSave> parts_save;
  uint64_t part_hash = 0;  // set by this rank's part writer, read after join

  Impl(std::string d, int k, Communicator& c, const CheckpointSchema& sc)
      : dir(std::move(d)), keep(k), comm(c), schema(sc), validity(sc) {}

  std::string final_path(int64_t step) const { return dir + "/" + ckpt_format::file_name(step); }

  // Rank 0 checks the target and creates the private temporary file.
  std::string prepare(int64_t step, uint64_t estimate) {
    const std::string final_p = final_path(step);
    struct stat st {};
    if (lstat(final_p.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
      throw std::runtime_error(final_p + " exists and is " +
                               (S_ISLNK(st.st_mode) ? "a symlink" : "not a regular file") +
                               "; refusing to write through it");
    }
    const unsigned long long free = free_bytes(dir);
    if (free < estimate) {
      throw std::runtime_error("not enough space in " + dir + ": the checkpoint needs about " +
                               std::to_string(estimate) + " bytes, " + std::to_string(free) +
                               " are free");
    }
    const std::string tmp = dir + "/" + ckpt_format::temp_name(step, static_cast<long>(getpid()));
    remove_file(tmp);
    create_private_file(tmp);
    return tmp;
  }

  // Rank 0, after the file's contents are written: durable and renamed (pruned later, by
  // share_result). The write rate covers creating the file until it is durable.
  SaveResult finish(const std::string& tmp, int64_t step, double t_start, double t_write) {
    const std::string final_p = final_path(step);
    fsync_file(tmp);
    durable_rename(tmp, final_p);
    const double t_durable = now_mono();
    SaveResult r;
    r.path = final_p;
    r.bytes = file_bytes(final_p);
    r.seconds = t_durable - t_start;
    rate = static_cast<double>(r.bytes) / std::max(1e-9, t_durable - t_write);
    return r;
  }

  // Rank 0 alone writes the whole state (sync on the caller's thread or async on the writer's),
  // streamed from the snapshot (streamed_checkpoint.hpp).
  SaveResult write_whole(const StoredTensors& layout, const ckpt_format::Meta& meta,
                         StateSnapshot& snap, double t_start) {
    const double t_write = now_mono();
    const std::string tmp = prepare(meta.progress.step, estimate_bytes(layout, meta.progress));
    try {
      const StreamStats stats = write_checkpoint_streamed(tmp, layout, meta, snap);
      SaveResult r = finish(tmp, meta.progress.step, t_start, t_write);
      r.direct_io = stats.direct;
      return r;
    } catch (...) {
      try {
        remove_file(tmp);
      } catch (const std::exception&) {
        // The original error is the one worth reporting; a leftover temp is cleaned on start.
      }
      throw;
    }
  }

  // Every rank: writes its part of in_flight_snapshot on its writer thread (rank 0 none).
  void start_parts(const StoredTensors& layout, ckpt_format::Meta meta, Ranges ranges,
                   double t_start, const std::string& context);
  // Collective, on the training thread, once every part is written: rank 0 starts the merge.
  void merge_parts();
  std::string part_path(int rank) const {
    return moment_part_path(dir, parts_save->meta.progress.step, rank, comm.size());
  }
  void remove_parts() const;

#if RAILYARD_PARALLEL_HDF5
  // Sharded state, parallel HDF5: every rank writes its own hyperslabs of one file.
  SaveResult save_collective(const StoredTensors& layout, ckpt_format::Meta meta,
                             const ModelState& state, double t_start);
#endif
  // Replicated state is written by rank 0 as it is; shards are gathered to rank 0 first.
  SaveResult save_gathered(const StoredTensors& layout, const ckpt_format::Meta& meta,
                           const ModelState& state, const Ranges& ranges, double t_start);

  // Rank 0: writes in_flight_snapshot on the background thread.
  void start_background(const StoredTensors& layout, const Attributes& model,
                        TrainProgress progress, double t_start, const std::string& context);

  // Rank 0: the newest checkpoint that verifies and matches `expect` into `got`; each rejected
  // one goes to `warn`. Throws CheckpointError when the directory or a file cannot be read at
  // all (permissions): starting over from step 0 would hide checkpoints that may be valid.
  bool newest_valid(const Attributes& expect, const std::function<void(const std::string&)>& warn,
                    LoadedCheckpoint& got) {
    for (const Entry& e : scan(dir)) {
      const std::string path = dir + "/" + e.name;
      if (is_regular_nolink(path) && access(path.c_str(), R_OK) != 0) {
        throw CheckpointError("cannot read " + path + ": " + std::strerror(errno) +
                              " (fix its permissions, or move it away to skip it)");
      }
      try {
        if (!is_regular_nolink(path)) {
          throw CheckpointError(path + ": not a regular file (symlinks are not followed)");
        }
        got = read_checkpoint(path, schema, &expect);
        if (got.progress.step != e.step) {
          throw CheckpointError(path + ": holds step " + std::to_string(got.progress.step) +
                                ", its name says " + std::to_string(e.step));
        }
        validity.known_valid(path);
        return true;
      } catch (const CheckpointError& err) {
        if (warn) warn(std::string(err.what()) + "; trying an older checkpoint");
      }
    }
    return false;
  }

  // Runs `write` on rank 0; every rank gets its result, or throws its error (share_result).
  SaveResult on_root(const std::function<SaveResult()>& write) {
    std::string error;
    SaveResult r;
    if (comm.rank() == 0) {
      try {
        r = write();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    return share_result(error, r);
  }

  // Every rank learns rank 0's outcome; rank 0 first prunes after a successful save. Pruning
  // checks files in a forked child (check_checkpoint), so it runs here on the caller's thread,
  // never on the background writer's: a fork from that thread while the caller is inside a
  // threaded BLAS call deadlocks the BLAS thread pool (its fork handlers stop the pool).
  SaveResult share_result(std::string error, SaveResult r) {
    if (comm.rank() == 0 && error.empty() && !r.path.empty()) {
      try {
        const size_t slash = r.path.find_last_of('/');
        validity.known_valid(r.path);
        prune(dir, keep, ckpt_format::step_of(r.path.substr(slash + 1)).value_or(-1), validity);
      } catch (const std::exception& e) {
        error = std::string("pruning after the save: ") + e.what();
      }
    }
    raise_if_any(&comm, error);
    broadcast_string(comm, r.path, 0);
    bcast_pod(comm, r.bytes);
    bcast_pod(comm, r.seconds);
    bcast_pod(comm, r.direct_io);
    double shared_rate = rate;
    bcast_pod(comm, shared_rate);
    rate = shared_rate;
    return r;
  }
};

namespace {

// Before a synchronous save: waits for a pending background save, printing its failure on rank 0
// (the save in hand matters more; the earlier failure is still reported). Returns the prefix of
// this save's errors.
std::string begin_sync_save(CheckpointStore& store, int rank, int64_t step) {
  try {
    store.wait();
  } catch (const CheckpointError& e) {
    if (rank == 0) std::fprintf(stderr, "railyard: %s\n", e.what());
  }
  return "checkpoint of step " + std::to_string(step) + " in " + store.dir() + " failed: ";
}

}  // namespace

CheckpointStore::CheckpointStore(std::string dir, int keep, Communicator& comm,
                                 const CheckpointSchema& schema)
    : impl_(std::make_unique<Impl>(std::move(dir), keep, comm, schema)) {
  while (impl_->dir.size() > 1 && impl_->dir.back() == '/') impl_->dir.pop_back();
  // HDF5 initialises itself (in parallel builds with MPI calls) on first use; that must happen
  // here on the MPI thread, not on the background writer's.
  {
    std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
    h5::quiet_errors();
    if (H5open() < 0) throw CheckpointError("checkpoint: the HDF5 library failed to initialise");
  }
  // A file-size limit (ulimit -f) must fail the save with EFBIG, not kill the job with SIGXFSZ.
  struct sigaction sa {};
  if (sigaction(SIGXFSZ, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL) signal(SIGXFSZ, SIG_IGN);
  std::string error;
  if (keep < 0) {
    error = "--keep " + std::to_string(keep) + " is negative (0 keeps every checkpoint)";
  } else if (comm.rank() == 0) {
    try {
      ensure_private_dir(impl_->dir);
      remove_stale_temps(impl_->dir);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  try {
    raise_if_any(&comm, error);
    if (comm.size() > 1) impl_->shared_dir = every_rank_sees(comm, impl_->dir);
  } catch (const std::exception& e) {
    throw CheckpointError(std::string("checkpoint directory: ") + e.what());
  }
}

CheckpointStore::~CheckpointStore() {
  try {
    impl_->background.join();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "railyard: background checkpoint failed: %s\n", e.what());
  }
}

SaveResult CheckpointStore::save(const StoredTensors& layout, const Attributes& model,
                                 const ModelState& state, const TrainProgress& progress) {
  Impl& s = *impl_;
  const double t_start = now_mono();
  const std::string context = begin_sync_save(*this, s.comm.rank(), progress.step);
  Ranges ranges;
  try {
    raise_if_any(&s.comm, check_local(layout, state));
    ranges = exchange_ranges(s.comm, state.shard_begin, state.shard_end, layout.total);
  } catch (const std::exception& e) {
    throw CheckpointError(context + e.what());
  }
  ckpt_format::Meta meta{model, progress, state.adam_step, now_unix()};
  try {
#if RAILYARD_PARALLEL_HDF5
    if (!ranges.replicated) return s.save_collective(layout, std::move(meta), state, t_start);
#endif
    return s.save_gathered(layout, meta, state, ranges, t_start);
  } catch (const std::exception& e) {
    throw CheckpointError(context + e.what());
  }
}

#if RAILYARD_PARALLEL_HDF5
SaveResult CheckpointStore::Impl::save_collective(const StoredTensors& layout,
                                                  ckpt_format::Meta meta, const ModelState& state,
                                                  double t_start) {
  // Rank 0's progress is the one broadcast, so its meta.progress is the caller's progress.
  bcast_progress(comm, meta.progress);
  bcast_pod(comm, meta.created_unix);
  const int64_t step = meta.progress.step;
  std::string tmp, error;
  if (comm.rank() == 0) {
    try {
      tmp = prepare(step, estimate_bytes(layout, meta.progress));
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  raise_if_any(&comm, error);
  broadcast_string(comm, tmp, 0);
  const double t_write = now_mono();
  const WriteSlice slice{state.params.data(), state.m.data(), state.v.data(), state.shard_begin,
                         state.shard_end};
  SaveResult r;
  try {
    write_checkpoint_collective(comm, tmp, layout, meta, slice);
    if (comm.rank() == 0) r = finish(tmp, step, t_start, t_write);
  } catch (const std::exception& e) {
    if (comm.rank() == 0) remove_file(tmp);
    error = e.what();
  }
  return share_result(error, r);
}
#endif

SaveResult CheckpointStore::Impl::save_gathered(const StoredTensors& layout,
                                                const ckpt_format::Meta& meta,
                                                const ModelState& state, const Ranges& ranges,
                                                double t_start) {
  ModelState gathered;
  if (!ranges.replicated) {
    gather_to_root(comm, ranges, state.m, gathered.m, layout.total);
    gather_to_root(comm, ranges, state.v, gathered.v, layout.total);
    gathered.shard_end = layout.total;
  }
  return on_root([&] {
    HostStateSnapshot snap(state, ranges.replicated ? state : gathered);
    return write_whole(layout, meta, snap, t_start);
  });
}

SaveResult CheckpointStore::save(const StoredTensors& layout, const Attributes& model,
                                 StateSnapshot& snapshot, const TrainProgress& progress) {
  if (snapshot.shard_begin() != 0 || snapshot.shard_end() != snapshot.total()) {
    return save(layout, model, materialize(snapshot), progress);  // ZeRO shards: gathered
  }
  Impl& s = *impl_;
  const double t_start = now_mono();
  const std::string context = begin_sync_save(*this, s.comm.rank(), progress.step);
  std::string error = snapshot.total() == layout.total
                          ? ""
                          : "the snapshot holds " + std::to_string(snapshot.total()) +
                                " parameters, the layout " + std::to_string(layout.total);
  try {
    raise_if_any(&s.comm, error);
    return s.on_root([&] {
      const ckpt_format::Meta meta{model, progress, snapshot.adam_step(), now_unix()};
      return s.write_whole(layout, meta, snapshot, t_start);
    });
  } catch (const std::exception& e) {
    throw CheckpointError(context + e.what());
  }
}

void CheckpointStore::save_async(const StoredTensors& layout, const Attributes& model,
                                 ModelState state, TrainProgress progress) {
  Impl& s = *impl_;
  const double t_start = now_mono();
  wait();
  const std::string context = "background checkpoint of step " + std::to_string(progress.step) +
                              " in " + s.dir + " failed: ";
  Ranges ranges;
  try {
    raise_if_any(&s.comm, check_local(layout, state));
    ranges = exchange_ranges(s.comm, state.shard_begin, state.shard_end, layout.total);
    if (!ranges.replicated && s.shared_dir) {
      s.in_flight = std::make_unique<ModelState>(std::move(state));
      s.in_flight_snapshot = std::make_shared<HostStateSnapshot>(*s.in_flight);
      s.start_parts(
          layout, ckpt_format::Meta{model, std::move(progress), s.in_flight->adam_step, now_unix()},
          std::move(ranges), t_start, context);
      return;
    }
    if (!ranges.replicated) {
      // MPI stays on the caller's thread (MPI_THREAD_FUNNELED): gather here, write there.
      FloatArray m_full, v_full;
      gather_to_root(s.comm, ranges, state.m, m_full, layout.total);
      gather_to_root(s.comm, ranges, state.v, v_full, layout.total);
      state.m = std::move(m_full);
      state.v = std::move(v_full);
      state.shard_begin = 0;
      state.shard_end = layout.total;
    }
  } catch (const std::exception& e) {
    throw CheckpointError(context + e.what());
  }
  s.async_pending = true;
  s.spare.reset();
  if (s.comm.rank() != 0) {
    s.spare = std::move(state);  // only rank 0 writes; the caller may reuse these buffers now
    return;
  }
  s.in_flight = std::make_unique<ModelState>(std::move(state));
  s.in_flight_snapshot = std::make_shared<HostStateSnapshot>(*s.in_flight);
  s.start_background(layout, model, std::move(progress), t_start, context);
}

void CheckpointStore::save_async(const StoredTensors& layout, const Attributes& model,
                                 std::shared_ptr<StateSnapshot> snapshot, TrainProgress progress) {
  Impl& s = *impl_;
  const double t_start = now_mono();
  const bool sharded = snapshot->shard_begin() != 0 || snapshot->shard_end() != snapshot->total();
  if (sharded && !s.shared_dir) {
    // ZeRO shards are gathered on the caller's thread (MPI_THREAD_FUNNELED), from host copies.
    save_async(layout, model, materialize(*snapshot), std::move(progress));
    return;
  }
  wait();
  const std::string context = "background checkpoint of step " + std::to_string(progress.step) +
                              " in " + s.dir + " failed: ";
  Ranges ranges;
  try {
    raise_if_any(&s.comm, snapshot->total() == layout.total
                              ? ""
                              : "the snapshot holds " + std::to_string(snapshot->total()) +
                                    " parameters, the layout " + std::to_string(layout.total));
    if (sharded) {
      ranges =
          exchange_ranges(s.comm, snapshot->shard_begin(), snapshot->shard_end(), layout.total);
    }
  } catch (const std::exception& e) {
    throw CheckpointError(context + e.what());
  }
  if (sharded) {
    const int64_t adam_step = snapshot->adam_step();
    s.in_flight.reset();
    s.in_flight_snapshot = std::move(snapshot);
    s.start_parts(layout, ckpt_format::Meta{model, std::move(progress), adam_step, now_unix()},
                  std::move(ranges), t_start, context);
    return;
  }
  s.async_pending = true;
  s.spare.reset();
  if (s.comm.rank() != 0) return;  // only rank 0 writes; the snapshot is released here
  s.in_flight_snapshot = std::move(snapshot);
  s.start_background(layout, model, std::move(progress), t_start, context);
}

void CheckpointStore::Impl::start_background(const StoredTensors& layout, const Attributes& model,
                                             TrainProgress progress, double t_start,
                                             const std::string& context) {
  Impl& s = *this;
  const int64_t adam_step = in_flight_snapshot->adam_step();
  auto job = [&s, layout,
              meta = ckpt_format::Meta{model, std::move(progress), adam_step, now_unix()},
              snap = in_flight_snapshot.get(), t_start, context]() {
    try {
      return s.write_whole(layout, meta, *snap, t_start);
    } catch (const std::exception& e) {
      throw CheckpointError(context + e.what());
    }
  };
  s.background.start(std::move(job));
}

void CheckpointStore::Impl::start_parts(const StoredTensors& layout, ckpt_format::Meta meta,
                                        Ranges ranges, double t_start, const std::string& context) {
  async_pending = true;
  spare.reset();
  phase = Phase::kParts;
  parts_save = PartsSave{layout, std::move(meta), std::move(ranges), t_start, context, ""};
  if (comm.rank() == 0) return;  // rank 0's shard goes into the file from its own snapshot
  background.start([this, path = part_path(comm.rank()), snap = in_flight_snapshot.get()] {
    part_hash = write_moment_part(path, *snap);
    return SaveResult{};
  });
}

void CheckpointStore::Impl::remove_parts() const {
  for (int q = 1; q < comm.size(); ++q) {
    try {
      remove_file(part_path(q));
    } catch (const std::exception& e) {
      // Left for the next start's cleanup of temporaries; the save's outcome stands.
      std::fprintf(stderr, "railyard: %s\n", e.what());
    }
  }
}

void CheckpointStore::Impl::merge_parts() {
  PartsSave& ps = *parts_save;
  phase = Phase::kMerge;
  std::string error;
  try {
    background.join();  // finished (or nothing started, on rank 0)
  } catch (const std::exception& e) {
    error = e.what();
  }
  try {
    raise_if_any(&comm, error);
  } catch (const std::exception& e) {
    ps.error = ps.context + e.what();
  }
  const std::vector<uint64_t> hashes = comm.allgather({comm.rank() == 0 ? 0 : part_hash});
  if (comm.rank() != 0) return;
  if (!ps.error.empty()) {
    remove_parts();
    return;
  }
  std::vector<MomentPart> parts;
  for (int q = 0; q < comm.size(); ++q) {
    parts.push_back({q == 0 ? "" : part_path(q), ps.ranges.begin[q], ps.ranges.end[q], hashes[q]});
  }
  background.start([this, parts = std::move(parts), snap = in_flight_snapshot.get()] {
    const PartsSave& ps = *parts_save;
    try {
      PartsSnapshot whole(*snap, parts);
      SaveResult r = write_whole(ps.layout, ps.meta, whole, ps.t_start);
      remove_parts();
      return r;
    } catch (const std::exception& e) {
      remove_parts();
      throw CheckpointError(ps.context + e.what());
    }
  });
}

std::optional<SaveResult> CheckpointStore::wait() {
  Impl& s = *impl_;
  if (!s.async_pending) return std::nullopt;
  if (s.phase == Impl::Phase::kParts) s.merge_parts();
  s.async_pending = false;
  std::string error;
  SaveResult r;
  if (s.comm.rank() == 0) {
    try {
      if (auto got = s.background.join()) r = *got;
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (s.parts_save && !s.parts_save->error.empty()) error = s.parts_save->error;
  }
  s.in_flight_snapshot.reset();  // before the state it may refer to
  if (s.in_flight) s.spare = std::move(*s.in_flight);
  s.in_flight.reset();
  s.parts_save.reset();
  s.phase = Impl::Phase::kNone;
  try {
    return s.share_result(error, r);
  } catch (const std::exception& e) {
    throw CheckpointError(e.what());
  }
}

bool CheckpointStore::background_finished() {
  Impl& s = *impl_;
  if (!s.async_pending) return true;
  if (s.phase == Impl::Phase::kParts) {
    // Every rank's part writer decides whether rank 0 can merge now.
    const int64_t done = s.comm.rank() == 0 || s.background.finished() ? 1 : 0;
    if (s.comm.allreduce_min(done) == 0) return false;
    s.merge_parts();
  }
  if (s.parts_save && !s.parts_save->error.empty()) return true;  // failed parts: no merge runs
  // Rank 0's writer decides, so every rank calls wait() at the same step.
  int finished = s.comm.rank() == 0 && s.background.finished() ? 1 : 0;
  s.comm.broadcast(&finished, sizeof finished, 0);
  return finished != 0;
}

void init_checkpoint_io_before_mpi() {
  std::lock_guard<std::mutex> lock(h5::hdf5_mutex());
  // Both before the library initialises: H5dont_atexit skips the atexit shutdown; an HDF5
  // initialised while MPI is not yet running registers no MPI_Finalize hook.
  if (H5dont_atexit() < 0 || H5open() < 0) {
    throw CheckpointError("checkpoint: the HDF5 library failed to initialise");
  }
}

std::vector<CheckpointInfo> list_checkpoints(const std::string& dir,
                                             const CheckpointSchema& schema) {
  std::vector<CheckpointInfo> out;
  for (const Entry& e : scan(dir)) {
    CheckpointInfo info;
    info.path = dir + "/" + e.name;
    info.step = e.step;
    struct stat st {};
    if (lstat(info.path.c_str(), &st) != 0) {
      info.error = info.path + ": " + std::strerror(errno);
      out.push_back(std::move(info));
      continue;
    }
    info.bytes = static_cast<uint64_t>(st.st_size);
    info.mtime = static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * st.st_mtim.tv_nsec;
    if (!S_ISREG(st.st_mode)) {
      info.error = info.path + ": not a regular file (symlinks are not followed)";
    } else {
      const CheckpointCheck c = check_checkpoint(info.path, schema);
      if (!c.valid) {
        info.error = c.error;
      } else if (c.step != e.step) {
        info.error = info.path + ": holds step " + std::to_string(c.step) + ", its name says " +
                     std::to_string(e.step);
      } else {
        info.valid = true;
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<CheckpointInfo> CheckpointStore::list() const {
  return list_checkpoints(impl_->dir, impl_->schema);
}

std::optional<LoadedCheckpoint> CheckpointStore::load_latest(
    const Attributes& expect, const std::function<void(const std::string&)>& warn) {
  Impl& s = *impl_;
  wait();
  LoadedCheckpoint got;
  int found = 0;
  std::string fatal;
  if (s.comm.rank() == 0) {
    try {
      found = s.newest_valid(expect, warn, got) ? 1 : 0;
    } catch (const CheckpointError& e) {
      fatal = e.what();
    }
  }
  try {
    raise_if_any(&s.comm, fatal);
  } catch (const std::exception& e) {
    throw CheckpointError(e.what());
  }
  bcast_pod(s.comm, found);
  if (!found) return std::nullopt;
  if (s.comm.size() > 1) {
    broadcast_string(s.comm, got.path, 0);
    bcast_attributes(s.comm, got.model, s.schema);
    if (s.comm.rank() != 0) got.tensors = s.schema.tensors(got.model);
    bcast_progress(s.comm, got.progress);
    bcast_vec(s.comm, got.state.params);
    bcast_vec(s.comm, got.state.m);
    bcast_vec(s.comm, got.state.v);
    bcast_pod(s.comm, got.state.shard_begin);
    bcast_pod(s.comm, got.state.shard_end);
    bcast_pod(s.comm, got.state.adam_step);
  }
  return got;
}

std::optional<ModelState> CheckpointStore::take_spare() {
  std::optional<ModelState> out = std::move(impl_->spare);
  impl_->spare.reset();
  return out;
}

double CheckpointStore::write_rate() const {
  return impl_->rate;
}

const std::string& CheckpointStore::dir() const {
  return impl_->dir;
}

}  // namespace railyard
