// Checkpoint save/load throughput on a synthetic GPT state (default GPT-2 small: 124M
// parameters, 1.5 GB of fp32 params + Adam m + v), synchronous and async (the caller's stall),
// against the disk's own rate (measure with dd, see bench/NOTES.md). Also writes small
// checkpoints with a known pattern for tests (tests/integration/ckpt_h5py_reads.py).
//
//   checkpoint_bench --dir DIR [--layers 12 --dim 768 --heads 12 --vocab 50257 --seq 1024]
//                    [--repeat 3] [--steps 1] [--mode bench|pattern]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"

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

}  // namespace

int main(int argc, char** argv) {
  GptConfig c;
  c.vocab = 50257;
  c.padded_vocab = 50304;
  c.max_seq = 1024;
  c.layers = 12;
  c.heads = 12;
  c.dim = 768;
  std::string dir, mode = "bench";
  int repeat = 3, steps = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "checkpoint_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir")
      dir = next();
    else if (a == "--layers")
      c.layers = std::stoi(next());
    else if (a == "--dim")
      c.dim = std::stoi(next());
    else if (a == "--heads")
      c.heads = std::stoi(next());
    else if (a == "--vocab")
      c.vocab = std::stoi(next());
    else if (a == "--seq")
      c.max_seq = std::stoi(next());
    else if (a == "--repeat")
      repeat = std::stoi(next());
    else if (a == "--steps")
      steps = std::stoi(next());
    else if (a == "--mode")
      mode = next();
    else {
      std::fprintf(stderr, "checkpoint_bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty() || (mode != "bench" && mode != "pattern")) {
    std::fprintf(stderr, "usage: checkpoint_bench --dir DIR [--mode bench|pattern] ...\n");
    return 2;
  }
  c.padded_vocab = (c.vocab + 63) / 64 * 64;
  c.validate();
  Communicator& comm = Communicator::world();
  const ParamLayout layout = gpt_param_layout(c);
  CheckpointStore store(dir, mode == "pattern" ? 0 : 1, comm);

  if (mode == "pattern") {
    for (int64_t step = 1; step <= steps; ++step) {
      store.save(layout, c, pattern_state(layout, step), progress_at(step, c));
    }
    return 0;
  }

  const ModelState state = pattern_state(layout, 1);
  const double gb = 3.0 * static_cast<double>(layout.total()) * 4 / 1e9;
  std::printf("state: %zu parameters (padded), %.3f GB of params+m+v, dir %s\n", layout.total(), gb,
              dir.c_str());
  int64_t step = 1;
  for (int r = 0; r < repeat; ++r, ++step) {
    const SaveResult res = store.save(layout, c, state, progress_at(step, c));
    std::printf(
        "sync save   step %lld: %.3f s durable, %.3f GB/s (file %.3f GB; write rate %.3f GB/s)\n",
        static_cast<long long>(step), res.seconds, res.bytes / res.seconds / 1e9, res.bytes / 1e9,
        store.write_rate() / 1e9);
  }
  for (int r = 0; r < repeat; ++r, ++step) {
    // The trainer's stall: its host snapshot (here a memcpy of the state; on a GPU the
    // device-to-host copy) plus the save_async call itself. From the second save on, the
    // snapshot goes into the previous save's buffers (take_spare), so no fresh pages.
    const double t0 = now();
    std::optional<ModelState> spare = store.take_spare();
    const bool reused = spare.has_value();
    ModelState snapshot = reused ? std::move(*spare) : ModelState{};
    snapshot.params.assign(state.params.begin(), state.params.end());
    snapshot.m.assign(state.m.begin(), state.m.end());
    snapshot.v.assign(state.v.begin(), state.v.end());
    snapshot.shard_begin = state.shard_begin;
    snapshot.shard_end = state.shard_end;
    snapshot.adam_step = state.adam_step;
    const double t_copy = now();
    store.save_async(layout, c, std::move(snapshot), progress_at(step, c));
    const double t_call = now();
    const auto res = store.wait();
    std::printf(
        "async save  step %lld: stall %.1f ms (snapshot copy into %s buffers %.1f ms + "
        "save_async %.1f ms), background %.3f s durable (%.3f GB/s), waited %.3f s\n",
        static_cast<long long>(step), (t_call - t0) * 1e3, reused ? "reused" : "fresh",
        (t_copy - t0) * 1e3, (t_call - t_copy) * 1e3, res->seconds, res->bytes / res->seconds / 1e9,
        now() - t_call);
  }
  for (int r = 0; r < repeat; ++r) {
    const double t0 = now();
    const auto got = store.load_latest(c, nullptr);
    const double dt = now() - t0;
    std::printf("load+verify step %lld: %.3f s, %.3f GB/s (page cache warm)\n",
                static_cast<long long>(got->progress.step), dt, gb / dt);
  }
  return 0;
}
