#pragma once
// Checkpoint snapshots of one CUDA engine's state (fp32 master weights, AdamW m and v).
// A periodic save copies the state device-to-device into a buffer reserved at start, on a copy
// stream ordered after the optimizer step by an event; the compute stream waits for that copy
// (about 1 ms of device time for GPT-2 small) before the next step writes the state, and the
// host is not blocked at all. The writer thread then copies the snapshot to page-locked staging
// buffers in chunks on the same copy stream. A synchronous save (training stopped) reads the
// live buffers instead, needing no reserve.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "railyard/state_snapshot.hpp"

namespace railyard::cuda {

// Where the state lives: params [0, total), m and v the shard [shard_begin, shard_end).
struct DeviceState {
  const float* master = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;
  size_t total = 0, shard_begin = 0, shard_end = 0;
};

class DeviceSnapshots {
 public:
  // With `reserve`, sets aside device memory for one snapshot of `state` when it fits with
  // `headroom` bytes to spare; note() says what was reserved or why not.
  DeviceSnapshots(int device, const DeviceState& state, bool reserve, size_t headroom);
  ~DeviceSnapshots();
  DeviceSnapshots(const DeviceSnapshots&) = delete;
  DeviceSnapshots& operator=(const DeviceSnapshots&) = delete;

  // Bytes one snapshot takes (params + m + v, fp32).
  size_t bytes() const;
  bool reserved() const { return reserve_.bytes() > 0; }
  // For the start line, e.g. "ckpt snapshot 1.49 GB on device" or why there is none.
  const std::string& note() const { return note_; }

  // A frozen copy, taken once the work queued on `compute` so far is done (so after the
  // optimizer step); `compute` waits for the copy before anything queued later. Needs the
  // reserve; throws std::logic_error while the previous one is still alive (being written).
  std::shared_ptr<StateSnapshot> copy(cudaStream_t compute, int64_t adam_step);
  // The live state, after `compute` is drained: valid until the caller next changes the state.
  std::shared_ptr<StateSnapshot> view(cudaStream_t compute, int64_t adam_step);

  // Page-locked staging for the writer (kept between saves).
  std::vector<float*> staging(size_t n, size_t bytes);
  // Copies on the copy stream and waits for it (from any thread).
  void copy_to_host(const float* src, size_t count, float* dst);

 private:
  int device_;
  DeviceState state_;
  DeviceBuffer reserve_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, copied_ = nullptr;
  std::vector<PinnedBuffer> staging_;
  std::string note_;
  std::weak_ptr<StateSnapshot> live_;
};

}  // namespace railyard::cuda
