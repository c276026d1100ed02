#pragma once
// The CUDA engine's micro-step replayed as CUDA graphs. A training step launches hundreds of
// kernels (LayerNorm, cuBLASLt products, cuDNN attention, cross-entropy...); launched one by one
// from the host, the GPU waits between them whenever the host falls behind. StepGraphs records
// a phase's launches once into a graph (stream capture) and from then on launches the whole
// phase with one call: the same kernels, arguments and order, so the results are the same bits
// as the eager launches.
//
// A phase is keyed by everything that changes its launches (StepKey). The first call with a key
// runs eagerly: that warm-up builds what is built lazily (cuBLASLt plans, cuDNN graphs, kernel
// attributes) outside any capture, since allocating or synchronising inside one is not allowed.
// The second call captures, then launches the graph; later calls launch it. Capture uses
// cudaStreamCaptureModeThreadLocal, so other threads (the checkpoint writer) may keep using
// CUDA meanwhile. If a capture fails for any reason (a library that cannot be captured, an
// error in the launches), it is ended and dropped, the reason is logged once on stderr, that
// call runs eagerly and so does every later one: never a wrong result, never a crash.
//
// What the caller guarantees: the launches of one key read and write the same device addresses
// every time (fixed buffers), take no per-call value that is not in the key, and do not make
// the host wait (events the host or other streams wait on are recorded outside the phase).

#include <cuda_runtime.h>

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph_memsets.hpp"

namespace railyard::cuda {

struct StepKey {
  int phase = 0;  // which part of the step (the caller's numbering)
  int batch = 0, seq = 0;
  bool accumulate = false;  // gradients added to rather than overwritten
  uint32_t scale_bits = 0;  // a float argument of the launches, by its bits
  int input = 0;            // which of the caller's input buffers the launches read
  auto operator<=>(const StepKey&) const = default;
};

class StepGraphs {
 public:
  // Ranges whose memsets a graph zeroes once at its head instead (hoist_scratch_memsets,
  // graph_memsets.hpp; the caller keeps that function's promises for them in those graphs), by
  // owner ("matmul": Matmul::slot_arena(); "attention-fwd": the bytes cuDNN's forward calls zero
  // in their staggered workspaces), in the graphs of one StepKey::phase or (-1) in every graph.
  struct HoistedScratch {
    std::string owner;
    std::vector<ScratchRange> ranges;
    int phase = -1;
  };
  // `enabled` false: every run() launches eagerly (--cuda-graphs off).
  explicit StepGraphs(bool enabled, std::vector<HoistedScratch> scratch = {});
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Queues `launch`'s work on `stream`: eagerly, or as the graph captured for `key`. `launch`
  // must queue all its work on `stream` (or on streams it forks from and joins back to it).
  void run(const StepKey& key, cudaStream_t stream, const std::function<void()>& launch);

  // "cuda-graphs:on", with "(N captured, M launches, K memsets as kernels, H hoisted: matmul
  // A, attention-fwd B, attention-bwd C)" (per owner) once graphs run (the checks read that;
  // graph_memsets.hpp says why memsets become kernels and what hoisting one means),
  // "cuda-graphs:off", or "cuda-graphs:off (capture failed)".
  std::string describe() const;

 private:
  // Beyond this many keys, new ones run eagerly (a float argument that changes every batch
  // would otherwise capture a graph per batch).
  static constexpr size_t kMaxKeys = 32;
  struct Entry {
    int calls = 0;
    cudaGraphExec_t exec = nullptr;
  };
  // Captures `launch` (of phase `phase`) into e.exec; false (capture dropped, graphs off) on
  // failure.
  bool capture(Entry& e, int phase, cudaStream_t stream, const std::function<void()>& launch);
  // The memsets of `phase`'s ranges in `graph` hoisted, counted by owner.
  void hoist(cudaGraph_t graph, int phase);
  void turn_off(const std::string& why);

  bool enabled_;
  std::vector<HoistedScratch> scratch_;
  std::string off_reason_;
  std::map<StepKey, Entry> graphs_;
  size_t captured_ = 0, replays_ = 0, memsets_as_kernels_ = 0;
  std::vector<size_t> hoisted_;  // per owner
  bool full_logged_ = false;
};

}  // namespace railyard::cuda
