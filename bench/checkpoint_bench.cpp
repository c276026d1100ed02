// Checkpoint costs of a training run, all in one call (bench/NOTES.md, "Checkpoints"): a real
// engine (CPU or CUDA, default GPT-2 small: 124M parameters, 1.5 GB of fp32 params + Adam m + v)
// trains on random tokens while it
//   - takes periodic background saves: the training loop's stall (first save and later ones)
//     and the step time while the write runs against steps without one;
//   - takes synchronous saves (as on a signal), durable: GB/s against `dd oflag=direct` on the
//     same directory in the same call;
//   - loads and verifies the newest checkpoint: GB/s against reading the file with `dd`, and
//     where the load's time goes (the structure check, HDF5 open, allocation, read + verify).
// --mode shards (under mpirun, no engine): the periodic-save stall of ZeRO-1 moment shards, each
// rank holding the params and 1/world of m and v as a `--zero 1` run does.
// Also writes small checkpoints with a known pattern for tests (--mode pattern,
// tests/integration/ckpt_h5py_reads.py).
//
//   checkpoint_bench --dir DIR [--device cpu|cuda] [--precision fp32|bf16] [--batch B]
//                    [--layers 12 --dim 768 --heads 12 --vocab 50257 --seq 1024 (= max_seq)]
//                    [--repeat 3] [--json FILE] [--mode bench|pattern|load|shards --steps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/engine.hpp"
#include "railyard/gpt_checkpoint.hpp"

using namespace railyard;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// params[i] = (i % 4096) / 4096, m = -params / 2, v = params / 4 over the flat index i (padding
// included), so a reader in any language can check every element.
ModelState pattern_state(const ParamLayout& layout, int64_t step) {
  ModelState s;
  const size_t n = layout.total();
  s.params.resize(n);
  s.m.resize(n);
  s.v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float p = static_cast<float>(i % 4096) / 4096.0f;
    s.params[i] = p;
    s.m[i] = -p / 2;
    s.v[i] = p / 4;
  }
  s.shard_end = n;
  s.adam_step = step;
  return s;
}

TrainProgress progress_at(int64_t step, const GptConfig& c) {
  TrainProgress p;
  p.step = step;
  p.tokens_seen = step * 1024;
  p.lr = 6e-4;
  p.loader = {7, 0, static_cast<uint64_t>(step)};
  p.rng_state = {1, 2, 3, 4};
  p.world_size = Communicator::world().size();
  p.config_json = "{\"bench\":true,\"layers\":" + std::to_string(c.layers) + "}";
  return p;
}

constexpr const char* kUsage =
    "usage: checkpoint_bench --dir DIR [--device cpu|cuda] [--precision fp32|bf16] [--batch B]\n"
    "         [--layers 12 --dim 768 --heads 12 --vocab 50257 --seq 1024] [--repeat 3]\n"
    "         [--json FILE] [--mode bench|pattern|load|shards --steps N]\n"
    "bench (default): periodic-save stall (first, later), step time during a background write,\n"
    "sync save vs `dd oflag=direct`, load + verify vs a `dd` read, all in DIR; one JSON line to\n"
    "stdout and FILE. pattern: N small checkpoints of a known pattern for tests.\n"
    "shards (under mpirun): the periodic-save stall with ZeRO-1 moment shards on every rank.\n";

struct Options {
  GptConfig model;
  std::string dir, mode = "bench", json, device = "cpu", precision = "fp32";
  int repeat = 3, steps = 1, batch = 4, seq = 1024;
};

// GB/s that `dd` reports on its last line ("N bytes (...) copied, S s, R GB/s"): N / S.
double run_dd(const std::string& args) {
  const std::string cmd = "dd " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return 0;
  char line[512];
  double rate = 0;
  while (std::fgets(line, sizeof line, p) != nullptr) {
    unsigned long long bytes = 0;
    const char* comma = std::strstr(line, "copied, ");
    if (std::sscanf(line, "%llu bytes", &bytes) == 1 && comma != nullptr) {
      const double secs = std::atof(comma + 8);
      if (secs > 0) rate = static_cast<double>(bytes) / secs / 1e9;
    }
  }
  pclose(p);
  // A ratio against 0 would print inf into the JSON: no figure is better than a wrong one.
  if (rate <= 0) throw std::runtime_error("no rate from `" + cmd + "` (is dd installed?)");
  return rate;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class Runner {
 public:
  Runner(const Options& o, Engine& engine) : o_(o), engine_(engine), rng_(1) {
    const size_t n = static_cast<size_t>(o.batch) * o.seq;
    tokens_.resize(n);
    targets_.resize(n);
  }
  // One optimizer step on random tokens; its wall time (the loss fetch waits for the device).
  double step() {
    std::uniform_int_distribution<int32_t> tok(0, o_.model.vocab - 1);
    for (size_t i = 0; i < tokens_.size(); ++i) tokens_[i] = tok(rng_), targets_[i] = tok(rng_);
    const double t0 = now();
    engine_.zero_grad();
    engine_.forward_backward(tokens_, targets_, o_.batch, o_.seq, 1.0f, true);
    engine_.reduce_gradients();
    engine_.optimizer_step(AdamWParams{}, 1e-4f);
    ++done_;
    return now() - t0;
  }
  int64_t done() const { return done_; }

 private:
  const Options& o_;
  Engine& engine_;
  std::mt19937 rng_;
  std::vector<int32_t> tokens_, targets_;
  int64_t done_ = 0;
};

// The trainer's periodic save: a snapshot (device-side where the engine has one) handed to the
// background writer; returns the time the caller was blocked.
double periodic_save(Engine& engine, CheckpointStore& store, int64_t step, const GptConfig& c) {
  const double t0 = now();
  if (std::shared_ptr<StateSnapshot> snap = engine.snapshot_state(true)) {
    store.save_async(gpt_stored_tensors(engine.layout()), gpt_attributes(c), std::move(snap),
                     progress_at(step, c));
  } else {
    ModelState st = store.take_spare().value_or(ModelState{});
    engine.save_state(st);
    store.save_async(gpt_stored_tensors(engine.layout()), gpt_attributes(c), std::move(st),
                     progress_at(step, c));
  }
  return now() - t0;
}

// Loads and verifies the newest checkpoint `repeat` times after a warm dd read of it (the
// saves wrote around the page cache: the first read brings the file in, so both are measured
// warm): the median load GB/s and the read's, and the median of each phase of the load.
struct LoadFigures {
  double load_gbps, read_gbps;
  LoadPhases phases;  // medians, ms
  double other_ms;    // the rest of load_latest (listing the directory, choosing the file)
};

// The median of each phase over the loads, and of what they leave of each load's `secs`.
LoadFigures phase_medians(const std::vector<LoadPhases>& ph, const std::vector<double>& secs) {
  std::vector<double> check, open, alloc, read, other;
  for (size_t i = 0; i < ph.size(); ++i) {
    check.push_back(ph[i].check_ms);
    open.push_back(ph[i].open_ms);
    alloc.push_back(ph[i].allocate_ms);
    read.push_back(ph[i].read_ms);
    other.push_back(secs[i] * 1e3 - ph[i].check_ms - ph[i].open_ms - ph[i].allocate_ms -
                    ph[i].read_ms);
  }
  LoadFigures f{};
  f.phases = {median(check), median(open), median(alloc), median(read)};
  f.other_ms = median(other);
  return f;
}

// The phases as JSON fields, "\"load_check_ms\": ..., ..." (no braces).
std::string phases_json(const LoadFigures& f) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\"load_check_ms\": %.1f, \"load_open_ms\": %.1f, \"load_allocate_ms\": %.2f, "
                "\"load_read_ms\": %.1f, \"load_other_ms\": %.1f",
                f.phases.check_ms, f.phases.open_ms, f.phases.allocate_ms, f.phases.read_ms,
                f.other_ms);
  return buf;
}
LoadFigures measure_load(CheckpointStore& store, const GptConfig& c, const std::string& newest,
                         double gb, int repeat) {
  run_dd("if=" + newest + " of=/dev/null bs=64M");
  const double read_gbps = run_dd("if=" + newest + " of=/dev/null bs=64M");
  std::printf("dd read of %s (page cache warm): %.3f GB/s\n", newest.c_str(), read_gbps);
  std::vector<double> rates, secs_all;
  std::vector<LoadPhases> phases;
  for (int r = 0; r < repeat; ++r) {
    const double t0 = now();
    const auto got = store.load_latest(gpt_attributes(c), nullptr);
    const double secs = now() - t0;
    if (!got || got->path != newest) {
      throw std::runtime_error("loaded " + (got ? got->path : "nothing") + ", not " + newest);
    }
    rates.push_back(gb / secs);
    secs_all.push_back(secs);
    phases.push_back(got->phases);
    const LoadPhases& p = got->phases;
    std::printf(
        "load+verify %d: %.3f s, %.3f GB/s (page cache warm) | check %.1f ms, open %.1f ms, "
        "allocate %.2f ms, read+verify %.1f ms\n",
        r + 1, secs, rates.back(), p.check_ms, p.open_ms, p.allocate_ms, p.read_ms);
  }
  LoadFigures f = phase_medians(phases, secs_all);
  f.load_gbps = median(rates);
  f.read_gbps = read_gbps;
  return f;
}

// --mode load: the load + verify of the newest checkpoint in --dir (one --mode pattern wrote
// at the same dims), `repeat` times, beside a warm dd read of it: the load path alone, on any
// machine, without an engine or training steps.
int run_load(const Options& o) {
  CheckpointStore store(o.dir, 0, Communicator::world(), gpt_checkpoint_schema());
  const std::vector<CheckpointInfo> all = store.list();
  if (all.empty()) throw std::runtime_error("no checkpoint in " + o.dir + " (run --mode pattern)");
  const CheckpointInfo& last = *std::max_element(
      all.begin(), all.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  const double gb = static_cast<double>(last.bytes) / 1e9;
  const LoadFigures f = measure_load(store, o.model, last.path, gb, o.repeat);
  char json[640];
  std::snprintf(json, sizeof json,
                "{\"file_gb\": %.4f, \"load_gbps\": %.3f, \"read_gbps\": %.3f, "
                "\"load_vs_read_pct\": %.1f, %s}\n",
                gb, f.load_gbps, f.read_gbps, f.load_gbps / f.read_gbps * 100,
                phases_json(f).c_str());
  std::printf("%s", json);
  if (!o.json.empty()) std::ofstream(o.json) << json;
  return 0;
}

// Periodic background saves, `repeat` of them, with steps running while each writes: the
// stalls, and the step times without and during a write.
struct PeriodicFigures {
  std::vector<double> stalls, quiet, during;
};
PeriodicFigures measure_periodic(Engine& engine, CheckpointStore& store, Runner& run,
                                 const GptConfig& c, int repeat) {
  PeriodicFigures f;
  for (int i = 0; i < 3; ++i) run.step();  // warm-up
  for (int i = 0; i < 10; ++i) f.quiet.push_back(run.step());
  for (int r = 0; r < repeat; ++r) {
    f.stalls.push_back(periodic_save(engine, store, run.done(), c));
    std::vector<double> these;
    while (!store.background_finished()) these.push_back(run.step());
    const auto res = store.wait();
    std::printf(
        "periodic save %d: stall %.2f ms | background write %.3f s durable (%.3f GB/s) | %zu "
        "steps during it, median %.1f ms (quiet %.1f ms)\n",
        r + 1, f.stalls.back() * 1e3, res->seconds, res->bytes / res->seconds / 1e9, these.size(),
        median(these) * 1e3, median(f.quiet) * 1e3);
    f.during.insert(f.during.end(), these.begin(), these.end());
    for (int i = 0; i < 5; ++i) f.quiet.push_back(run.step());
  }
  return f;
}

// Synchronous durable saves (as on a signal), `repeat` of them: the median GB/s; *newest
// receives the last file's path.
double measure_sync(Engine& engine, CheckpointStore& store, Runner& run, const GptConfig& c,
                    int repeat, double dd_gbps, std::string* newest) {
  std::vector<double> rates;
  for (int r = 0; r < repeat; ++r) {
    run.step();
    std::shared_ptr<StateSnapshot> live = engine.snapshot_state(false);
    SaveResult res = live ? store.save(gpt_stored_tensors(engine.layout()), gpt_attributes(c),
                                       *live, progress_at(run.done(), c))
                          : [&] {
                              ModelState st;
                              engine.save_state(st);
                              return store.save(gpt_stored_tensors(engine.layout()),
                                                gpt_attributes(c), st, progress_at(run.done(), c));
                            }();
    rates.push_back(res.bytes / res.seconds / 1e9);
    *newest = res.path;
    std::printf("sync save %d: %.3f s durable, %.3f GB/s (%.0f%% of dd)%s\n", r + 1, res.seconds,
                rates.back(), rates.back() / dd_gbps * 100,
                res.direct_io ? "" : " (page cache: O_DIRECT refused)");
  }
  return median(rates);
}

// The disk's own direct-write rate, same directory, same call (as much data as a save).
double measure_dd_direct(const std::string& dir, double gb) {
  const int count = std::max(1, static_cast<int>(gb * 1e9 / (64 << 20)));
  const double gbps = run_dd("if=/dev/zero of=" + dir +
                             "/ddtest bs=64M count=" + std::to_string(count) + " oflag=direct");
  std::remove((dir + "/ddtest").c_str());
  std::printf("dd oflag=direct, %d x 64 MiB: %.3f GB/s\n", count, gbps);
  return gbps;
}

void print_json(const Options& o, const Engine& engine, double gb, const PeriodicFigures& p,
                double sync_gbps, double dd_gbps, const LoadFigures& l) {
  // null when the writes were shorter than a step: not measured, rather than 0%.
  char during_ms[32] = "null", slowdown[32] = "null";
  if (!p.during.empty()) {
    std::snprintf(during_ms, sizeof during_ms, "%.2f", median(p.during) * 1e3);
    std::snprintf(slowdown, sizeof slowdown, "%.2f",
                  (median(p.during) / median(p.quiet) - 1) * 100);
  }
  const double stall_later = p.stalls.size() > 1
                                 ? median(std::vector<double>(p.stalls.begin() + 1, p.stalls.end()))
                                 : p.stalls.front();
  char json[1400];
  std::snprintf(json, sizeof json,
                "{\"engine\": \"%s\", \"state_gb\": %.4f, \"stall_ms_first\": %.3f, "
                "\"stall_ms_later\": %.3f, \"step_ms_quiet\": %.2f, \"step_ms_during_write\": "
                "%s, \"step_slowdown_pct\": %s, \"sync_gbps\": %.3f, \"dd_direct_gbps\": "
                "%.3f, \"sync_vs_dd_pct\": %.1f, \"load_gbps\": %.3f, \"read_gbps\": %.3f, "
                "\"load_vs_read_pct\": %.1f, %s}\n",
                engine.describe().c_str(), gb, p.stalls.front() * 1e3, stall_later * 1e3,
                median(p.quiet) * 1e3, during_ms, slowdown, sync_gbps, dd_gbps,
                sync_gbps / dd_gbps * 100, l.load_gbps, l.read_gbps,
                l.load_gbps / l.read_gbps * 100, phases_json(l).c_str());
  std::printf("%s", json);
  if (!o.json.empty()) std::ofstream(o.json) << json;
}

int run_bench(const Options& o) {
  Communicator& comm = Communicator::world();
  EngineOptions eo;
  eo.device = o.device;
  eo.precision = o.precision;
  eo.micro_batch = o.batch;
  eo.seq = o.seq;
  eo.reserve_snapshot = true;
  std::unique_ptr<Engine> engine = make_engine(o.model, eo, comm, 1);
  const GptConfig& c = o.model;
  const double gb = 3.0 * static_cast<double>(engine->layout().total()) * 4 / 1e9;
  std::printf("engine %s%s%s | state %.3f GB | B %d T %d | dir %s\n", engine->describe().c_str(),
              engine->checkpoint_note().empty() ? "" : " | ", engine->checkpoint_note().c_str(), gb,
              o.batch, o.seq, o.dir.c_str());
  CheckpointStore store(o.dir, 2, comm, gpt_checkpoint_schema());
  const double dd_gbps = measure_dd_direct(o.dir, gb);
  Runner run(o, *engine);
  const PeriodicFigures periodic = measure_periodic(*engine, store, run, c, o.repeat);
  std::string newest;
  const double sync_gbps = measure_sync(*engine, store, run, c, o.repeat, dd_gbps, &newest);
  const LoadFigures load = measure_load(store, c, newest, gb, o.repeat);
  print_json(o, *engine, gb, periodic, sync_gbps, dd_gbps, load);
  return 0;
}

// The integer field an option sets; null when it takes no integer (--seq sets two fields).
int* int_field(const std::string& a, Options& o) {
  GptConfig& c = o.model;
  return a == "--layers"   ? &c.layers
         : a == "--dim"    ? &c.dim
         : a == "--heads"  ? &c.heads
         : a == "--vocab"  ? &c.vocab
         : a == "--batch"  ? &o.batch
         : a == "--repeat" ? &o.repeat
         : a == "--steps"  ? &o.steps
                           : nullptr;
}

std::string* string_field(const std::string& a, Options& o) {
  return a == "--dir"         ? &o.dir
         : a == "--mode"      ? &o.mode
         : a == "--json"      ? &o.json
         : a == "--device"    ? &o.device
         : a == "--precision" ? &o.precision
                              : nullptr;
}

bool options_valid(const Options& o) {
  const bool known_mode =
      o.mode == "bench" || o.mode == "pattern" || o.mode == "load" || o.mode == "shards";
  return !o.dir.empty() && known_mode && o.repeat >= 1;
}

// Fills `o` from the command line; an exit code when the run ends here (--help, a bad argument).
std::optional<int> parse(int argc, char** argv, Options& o) {
  GptConfig& c = o.model;  // GPT-2 small unless the options say otherwise
  c.vocab = 50257;
  c.max_seq = 1024;
  c.layers = 12;
  c.heads = 12;
  c.dim = 768;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "checkpoint_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (int* field = int_field(a, o)) {
      *field = std::stoi(next());
    } else if (std::string* text = string_field(a, o)) {
      *text = next();
    } else if (a == "--seq") {
      c.max_seq = o.seq = std::stoi(next());
    } else {
      std::fprintf(stderr, "checkpoint_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (!options_valid(o)) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  c.padded_vocab = (c.vocab + 63) / 64 * 64;
  c.validate();
  return std::nullopt;
}

int write_patterns(const Options& o) {
  const ParamLayout layout = gpt_param_layout(o.model);
  CheckpointStore store(o.dir, 0, Communicator::world(), gpt_checkpoint_schema());
  for (int64_t step = 1; step <= o.steps; ++step) {
    store.save(gpt_stored_tensors(layout), gpt_attributes(o.model), pattern_state(layout, step),
               progress_at(step, o.model));
  }
  return 0;
}

// This rank's ZeRO-1 shard of the pattern state: the params whole, m and v over its 1/world.
ModelState pattern_shard(const ParamLayout& layout, const Communicator& comm) {
  ModelState s = pattern_state(layout, 1);
  const size_t n = layout.total(), w = static_cast<size_t>(comm.size());
  const size_t r = static_cast<size_t>(comm.rank());
  s.shard_begin = n * r / w;
  s.shard_end = n * (r + 1) / w;
  s.m.assign(s.m.begin() + static_cast<std::ptrdiff_t>(s.shard_begin),
             s.m.begin() + static_cast<std::ptrdiff_t>(s.shard_end));
  s.v.assign(s.v.begin() + static_cast<std::ptrdiff_t>(s.shard_begin),
             s.v.begin() + static_cast<std::ptrdiff_t>(s.shard_end));
  return s;
}

// --mode shards: `repeat` periodic saves as the trainer takes them without a device snapshot
// (the state copied into the previous save's buffers, then save_async); 10 ms stand-in steps,
// each ending at a step boundary (background_finished), until the save is durable. The stall is
// the slowest rank's.
int run_shards(const Options& o) {
  Communicator& comm = Communicator::world();
  const ParamLayout layout = gpt_param_layout(o.model);
  const ModelState live = pattern_shard(layout, comm);
  CheckpointStore store(o.dir, 2, comm, gpt_checkpoint_schema());
  std::vector<double> stalls, calls;  // the slowest rank's, ms
  auto slowest = [&](double secs) {
    return static_cast<double>(comm.allreduce_max(static_cast<int64_t>(secs * 1e6))) / 1e3;
  };
  for (int i = 0; i < o.repeat; ++i) {
    comm.barrier();
    const double t0 = now();
    ModelState st = store.take_spare().value_or(ModelState{});
    st.params = live.params;
    st.m = live.m;
    st.v = live.v;
    st.shard_begin = live.shard_begin;
    st.shard_end = live.shard_end;
    st.adam_step = live.adam_step;
    const double t1 = now();
    store.save_async(gpt_stored_tensors(layout), gpt_attributes(o.model), std::move(st),
                     progress_at(i + 1, o.model));
    const double t2 = now();
    stalls.push_back(slowest(t2 - t0));
    calls.push_back(slowest(t2 - t1));
    int steps = 0;
    for (; !store.background_finished(); ++steps) usleep(10000);
    const auto res = store.wait();
    if (comm.rank() == 0) {
      std::printf(
          "periodic save %d: stall %.2f ms (slowest of %d ranks), of which save_async "
          "%.2f ms, the rest the copy into the spare buffers | durable after %.3f s, %d "
          "steps of 10 ms during it\n",
          i + 1, stalls.back(), comm.size(), calls.back(), res->seconds, steps);
    }
  }
  auto later = [](const std::vector<double>& v) {
    return v.size() > 1 ? median(std::vector<double>(v.begin() + 1, v.end())) : v.front();
  };
  if (comm.rank() == 0) {
    std::printf(
        "{\"mode\": \"shards\", \"world\": %d, \"state_gb\": %.4f, "
        "\"stall_ms_first\": %.3f, \"stall_ms_later\": %.3f, "
        "\"save_async_ms_first\": %.3f, \"save_async_ms_later\": %.3f}\n",
        comm.size(), 3.0 * static_cast<double>(layout.total()) * 4 / 1e9, stalls.front(),
        later(stalls), calls.front(), later(calls));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const std::optional<int> code = parse(argc, argv, o)) return *code;
  if (o.mode == "pattern") return write_patterns(o);
  try {
    if (o.mode == "shards") return run_shards(o);
    return o.mode == "load" ? run_load(o) : run_bench(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_bench: %s\n", e.what());
    return 1;
  }
}
