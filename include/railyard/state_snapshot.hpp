#pragma once
// A frozen copy of the model state that the checkpoint writer reads in pieces, off the training
// thread: params over the whole flat layout, AdamW m and v over [shard_begin, shard_end). An
// engine that keeps its state on a device implements it with a device-side copy, so a periodic
// save stops training only for that copy; the writer then streams the copy to the file through
// a few host staging buffers (docs/checkpoint-format.md, "How a save is written").

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "railyard/train_state.hpp"

namespace railyard {

enum class StateArray { kParams = 0, kM = 1, kV = 2 };

// The checkpoint writer's staging: this many buffers of this size (an engine may allocate them
// ahead, e.g. page-locked at start, so that the first save does not).
constexpr size_t kStagingBuffers = 3;
constexpr size_t kStagingBytes = size_t{64} << 20;

class StateSnapshot {
 public:
  virtual ~StateSnapshot() = default;

  virtual size_t total() const = 0;  // elements of params (the layout's total)
  virtual size_t shard_begin() const = 0;
  virtual size_t shard_end() const = 0;
  virtual int64_t adam_step() const = 0;

  // Copies elements [begin, begin + count) of `array`, in the flat index space (m and v: within
  // the shard), into host memory `dst`; returns when they are there. Called from one thread at
  // a time, which need not be the one that made the snapshot. Throws std::out_of_range for a
  // range outside the array, std::runtime_error when the copy fails.
  virtual void copy_out(StateArray array, size_t begin, size_t count, float* dst) = 0;

  // `n` host buffers of `bytes` each (a multiple of 4096), 4096-aligned so they can be written
  // with O_DIRECT, page-locked where that makes copy_out faster. Valid while the snapshot lives;
  // the same buffers on every call.
  virtual std::vector<float*> staging(size_t n, size_t bytes);

 private:
  std::vector<std::unique_ptr<float, void (*)(void*)>> own_staging_;
  size_t own_staging_bytes_ = 0;
};

// The snapshot of host ModelStates (the CPU engine, a gathered ZeRO state, tests): copy_out
// is a memcpy. Refers to states the caller keeps alive, or owns one.
class HostStateSnapshot final : public StateSnapshot {
 public:
  explicit HostStateSnapshot(const ModelState& state) : params_(&state), moments_(&state) {}
  // Params (and adam_step) of one state, the moments of another.
  HostStateSnapshot(const ModelState& params_from, const ModelState& moments_from)
      : params_(&params_from), moments_(&moments_from) {}
  explicit HostStateSnapshot(ModelState&& state)
      : owned_(std::make_unique<ModelState>(std::move(state))),
        params_(owned_.get()),
        moments_(owned_.get()) {}

  size_t total() const override { return params_->params.size(); }
  size_t shard_begin() const override { return moments_->shard_begin; }
  size_t shard_end() const override { return moments_->shard_end; }
  int64_t adam_step() const override { return params_->adam_step; }
  void copy_out(StateArray array, size_t begin, size_t count, float* dst) override;

 private:
  std::unique_ptr<ModelState> owned_;
  const ModelState* params_;
  const ModelState* moments_;
};

// A host copy of the whole snapshot (for the paths that need ModelState: ZeRO gathers).
ModelState materialize(StateSnapshot& snap);

// Checks that [begin, begin + count) lies within `array` of `s`; returns the offset of `begin`
// in that array's storage (begin - shard_begin for m and v). Throws std::out_of_range.
size_t snapshot_offset(const StateSnapshot& s, StateArray array, size_t begin, size_t count);

}  // namespace railyard
