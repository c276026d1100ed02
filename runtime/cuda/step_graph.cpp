#include "step_graph.hpp"

#include <cstdio>
#include <exception>
#include <utility>

#include "cuda_check.hpp"

namespace railyard::cuda {
namespace {

// Ends a capture that failed part-way, which returns the stream to ordinary use, and drops what
// was recorded. The capture's own error is what ending an invalidated capture returns: expected
// here, and not sticky, so it is cleared for the eager launches that follow.
void abandon_capture(cudaStream_t stream) {
  cudaGraph_t partial = nullptr;
  if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial != nullptr) {
    cudaGraphDestroy(partial);
  }
  (void)cudaGetLastError();
}

}  // namespace

StepGraphs::StepGraphs(bool enabled, std::vector<HoistedScratch> scratch)
    : enabled_(enabled), scratch_(std::move(scratch)), hoisted_(scratch_.size(), 0) {}

StepGraphs::~StepGraphs() {
  for (auto& [key, e] : graphs_) {
    if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
  }
}

void StepGraphs::run(const StepKey& key, cudaStream_t stream, const std::function<void()>& launch) {
  if (!enabled_) return launch();
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() >= kMaxKeys) {
      if (!full_logged_) {
        std::fprintf(stderr,
                     "railyard: warning: more than %zu different step shapes or loss scales: "
                     "the new ones run without CUDA graphs (same results, slower)\n",
                     kMaxKeys);
        full_logged_ = true;
      }
      return launch();
    }
    it = graphs_.emplace(key, Entry{}).first;
  }
  Entry& e = it->second;
  if (e.exec == nullptr) {
    // The first call is the warm-up; the second captures.
    if (++e.calls < 2 || !capture(e, key.phase, stream, launch)) return launch();
  }
  RY_CUDA(cudaGraphLaunch(e.exec, stream));
  ++replays_;
}

void StepGraphs::hoist(cudaGraph_t graph, int phase) {
  std::vector<ScratchRange> ranges;
  std::vector<size_t> owner;  // ranges[i]'s in scratch_
  for (size_t o = 0; o < scratch_.size(); ++o) {
    if (scratch_[o].phase >= 0 && scratch_[o].phase != phase) continue;
    for (const ScratchRange& r : scratch_[o].ranges) {
      if (r.bytes == 0) continue;
      ranges.push_back(r);
      owner.push_back(o);
    }
  }
  if (ranges.empty()) return;
  const std::vector<size_t> n = hoist_scratch_memsets(graph, ranges);
  for (size_t i = 0; i < n.size(); ++i) hoisted_[owner[i]] += n[i];
}

bool StepGraphs::capture(Entry& e, int phase, cudaStream_t stream,
                         const std::function<void()>& launch) {
  cudaGraph_t graph = nullptr;
  std::string why;
  try {
    RY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      launch();
    } catch (...) {
      abandon_capture(stream);
      throw;
    }
    RY_CUDA(cudaStreamEndCapture(stream, &graph));
    hoist(graph, phase);
    memsets_as_kernels_ += replace_small_memsets(graph);
    RY_CUDA(cudaGraphInstantiate(&e.exec, graph, 0));
  } catch (const std::exception& ex) {
    why = ex.what();
  }
  if (graph != nullptr) {
    cudaError_t err = cudaGraphDestroy(graph);  // the instantiated graph does not need it
    if (err != cudaSuccess && why.empty()) why = cudaGetErrorString(err);
  }
  if (!why.empty()) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess ||
        status != cudaStreamCaptureStatusNone) {
      abandon_capture(stream);
    }
    if (e.exec != nullptr) cudaGraphExecDestroy(e.exec);
    e.exec = nullptr;
    (void)cudaGetLastError();
    turn_off(why);
    return false;
  }
  ++captured_;
  return true;
}

void StepGraphs::turn_off(const std::string& why) {
  enabled_ = false;
  off_reason_ = why;
  std::fprintf(stderr,
               "railyard: warning: CUDA graphs turned off for the rest of the run, the step is "
               "launched kernel by kernel (same results, slower): capturing it failed: %s\n",
               why.c_str());
}

std::string StepGraphs::describe() const {
  if (enabled_ && captured_ == 0) return "cuda-graphs:on";
  if (enabled_) {
    size_t total = 0;
    std::string owners;
    for (size_t o = 0; o < scratch_.size(); ++o) {
      total += hoisted_[o];
      owners += (o == 0 ? ": " : ", ") + scratch_[o].owner + " " + std::to_string(hoisted_[o]);
    }
    return "cuda-graphs:on (" + std::to_string(captured_) + " captured, " +
           std::to_string(replays_) + " launches, " + std::to_string(memsets_as_kernels_) +
           " memsets as kernels, " + std::to_string(total) + " hoisted" + owners + ")";
  }
  if (off_reason_.empty()) return "cuda-graphs:off";
  return "cuda-graphs:off (capture failed)";
}

}  // namespace railyard::cuda
