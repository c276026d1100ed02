#pragma once
// Checkpoint snapshots of one CUDA engine's state (fp32 master weights, AdamW m and v).
// A periodic save copies m and v device-to-device into a buffer reserved at start and the master
// weights device-to-host into a page-locked host buffer (also allocated at start), both on a copy
// stream ordered after the optimizer step by an event: the device-to-device copies take about
// 0.5 ms of device time for GPT-2 small, the 0.5 GB over PCIe 10-20 ms, overlapping the next
// step's forward and backward. The compute stream waits for them only right before the state is
// next written (order_state_write: the optimizer update, a load), so the host is not blocked and
// the step not stalled. The writer thread then copies m and v to page-locked staging buffers in
// chunks on the same copy stream, and the weights from the host buffer once their copy is done.
// A synchronous save (training stopped) reads the live buffers instead, needing no reserve.

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
  // With `reserve`, sets aside device memory for the moments of one snapshot of `state` when it
  // fits with `headroom` bytes to spare, and page-locked host memory for its weights; note()
  // says what was reserved or why not.
  DeviceSnapshots(int device, const DeviceState& state, bool reserve, size_t headroom);
  ~DeviceSnapshots();
  DeviceSnapshots(const DeviceSnapshots&) = delete;
  DeviceSnapshots& operator=(const DeviceSnapshots&) = delete;

  // Bytes one snapshot takes on the device (m + v) and in page-locked host memory (params), fp32.
  size_t device_bytes() const;
  size_t host_bytes() const;
  bool reserved() const { return reserve_.bytes() > 0; }
  // For the start line, e.g. "ckpt snapshot 1.00 GB on device + 0.50 GB page-locked host" or
  // why there is none.
  const std::string& note() const { return note_; }

  // A frozen copy, taken once the work queued on `compute` so far is done (so after the
  // optimizer step). Needs the reserve; throws std::logic_error while the previous one is still
  // alive (being written).
  std::shared_ptr<StateSnapshot> copy(cudaStream_t compute, int64_t adam_step);
  // Makes `compute` wait for the last copy() before anything queued later: call it before
  // queueing (or, after synchronizing `compute`, making) any write of master, m or v.
  void order_state_write(cudaStream_t compute);
  // The live state, after `compute` is drained: valid until the caller next changes the state.
  std::shared_ptr<StateSnapshot> view(cudaStream_t compute, int64_t adam_step);

  // Page-locked staging for the writer (kept between saves).
  std::vector<float*> staging(size_t n, size_t bytes);
  // Copies on the copy stream and waits for it (from any thread).
  void copy_to_host(const float* src, size_t count, float* dst);
  // Waits until the last copy() has put the weights in the host buffer (from any thread).
  void wait_host_copy();

 private:
  int device_;
  DeviceState state_;
  DeviceBuffer reserve_;      // m, v
  PinnedBuffer host_master_;  // params
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, copied_ = nullptr;
  std::vector<PinnedBuffer> staging_;
  std::string note_;
  std::weak_ptr<StateSnapshot> live_;
};

}  // namespace railyard::cuda
