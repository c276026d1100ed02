#include "device_snapshot.hpp"

#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>

namespace railyard::cuda {
namespace {

std::string gb(size_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return s;
}

// The state at three pointers (the weights possibly in page-locked host memory, filled by the
// copy stream), read through its owner's copy stream.
class DeviceStateSnapshot final : public StateSnapshot {
 public:
  DeviceStateSnapshot(DeviceSnapshots& owner, const DeviceState& at, bool master_on_host,
                      int64_t adam_step)
      : owner_(owner), at_(at), master_on_host_(master_on_host), adam_step_(adam_step) {}

  size_t total() const override { return at_.total; }
  size_t shard_begin() const override { return at_.shard_begin; }
  size_t shard_end() const override { return at_.shard_end; }
  int64_t adam_step() const override { return adam_step_; }

  void copy_out(StateArray array, size_t begin, size_t count, float* dst) override {
    const size_t at = snapshot_offset(*this, array, begin, count);
    if (array == StateArray::kParams && master_on_host_) {
      owner_.wait_host_copy();
      std::memcpy(dst, at_.master + at, count * sizeof(float));
      return;
    }
    const float* src = array == StateArray::kParams ? at_.master
                       : array == StateArray::kM    ? at_.m
                                                    : at_.v;
    owner_.copy_to_host(src + at, count, dst);
  }
  std::vector<float*> staging(size_t n, size_t bytes) override { return owner_.staging(n, bytes); }

 private:
  DeviceSnapshots& owner_;
  DeviceState at_;
  bool master_on_host_;
  int64_t adam_step_;
};

}  // namespace

DeviceSnapshots::DeviceSnapshots(int device, const DeviceState& state, bool reserve,
                                 size_t headroom)
    : device_(device), state_(state) {
  RY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RY_CUDA(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  RY_CUDA(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
  if (!reserve) return;
  size_t free_b = 0, total_b = 0;
  RY_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (device_bytes() + headroom > free_b) {
    note_ = "ckpt snapshot: no room on the device (needs " + gb(device_bytes()) + ", " +
            gb(free_b) + " free), periodic saves copy to the host inside the step (slower)";
    return;
  }
  // Page-locked now, as the staging: pinning on the writer thread during the first save could
  // hold up the training thread's CUDA calls.
  try {
    host_master_ = PinnedBuffer(host_bytes());
  } catch (const std::exception& e) {
    (void)cudaGetLastError();  // not sticky: cleared, so the next launch check does not see it
    note_ = "ckpt snapshot: no page-locked host memory for the weights (needs " + gb(host_bytes()) +
            ": " + e.what() + "), periodic saves copy to the host inside the step (slower)";
    return;
  }
  reserve_ = DeviceBuffer(device_bytes());
  staging(kStagingBuffers, kStagingBytes);
  note_ = "ckpt snapshot " + gb(device_bytes()) + " on device + " + gb(host_bytes()) +
          " page-locked host, " + gb(kStagingBuffers * kStagingBytes) + " page-locked staging";
}

DeviceSnapshots::~DeviceSnapshots() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (copied_ != nullptr) cudaEventDestroy(copied_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

size_t DeviceSnapshots::device_bytes() const {
  return 2 * (state_.shard_end - state_.shard_begin) * sizeof(float);
}

size_t DeviceSnapshots::host_bytes() const {
  return state_.total * sizeof(float);
}

std::shared_ptr<StateSnapshot> DeviceSnapshots::copy(cudaStream_t compute, int64_t adam_step) {
  if (!reserved()) throw std::logic_error("DeviceSnapshots::copy without a reserve");
  if (!live_.expired()) {
    throw std::logic_error(
        "a checkpoint snapshot is taken while the previous one is still "
        "being written (wait for the background save first)");
  }
  const size_t n = state_.shard_end - state_.shard_begin;
  DeviceState at = state_;
  at.master = host_master_.as<float>();
  at.m = reserve_.as<float>();
  at.v = at.m + n;
  RY_CUDA(cudaEventRecord(ready_, compute));
  RY_CUDA(cudaStreamWaitEvent(stream_, ready_, 0));
  // The moments first: the writer starts on them (device-to-device, well under a millisecond)
  // while the weights cross PCIe (10-20 ms) behind them on the same stream.
  RY_CUDA(cudaMemcpyAsync(const_cast<float*>(at.m), state_.m, n * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_));
  RY_CUDA(cudaMemcpyAsync(const_cast<float*>(at.v), state_.v, n * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_));
  RY_CUDA(cudaMemcpyAsync(const_cast<float*>(at.master), state_.master, host_bytes(),
                          cudaMemcpyDeviceToHost, stream_));
  RY_CUDA(cudaEventRecord(copied_, stream_));
  auto snap = std::make_shared<DeviceStateSnapshot>(*this, at, true, adam_step);
  live_ = snap;
  return snap;
}

void DeviceSnapshots::order_state_write(cudaStream_t compute) {
  // An event never recorded counts as complete: no wait before the first copy().
  RY_CUDA(cudaStreamWaitEvent(compute, copied_, 0));
}

void DeviceSnapshots::wait_host_copy() {
  RY_CUDA(cudaSetDevice(device_));
  RY_CUDA(cudaEventSynchronize(copied_));
}

std::shared_ptr<StateSnapshot> DeviceSnapshots::view(cudaStream_t compute, int64_t adam_step) {
  RY_CUDA(cudaStreamSynchronize(compute));
  return std::make_shared<DeviceStateSnapshot>(*this, state_, false, adam_step);
}

std::vector<float*> DeviceSnapshots::staging(size_t n, size_t bytes) {
  RY_CUDA(cudaSetDevice(device_));  // the writer thread starts on device 0
  if (!staging_.empty() && staging_.front().bytes() != bytes) staging_.clear();
  while (staging_.size() < n) staging_.emplace_back(bytes);
  std::vector<float*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(staging_[i].as<float>());
  return out;
}

void DeviceSnapshots::copy_to_host(const float* src, size_t count, float* dst) {
  RY_CUDA(cudaSetDevice(device_));
  RY_CUDA(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  RY_CUDA(cudaStreamSynchronize(stream_));
}

}  // namespace railyard::cuda
