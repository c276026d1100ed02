#include "device_snapshot.hpp"

#include <cstdio>
#include <stdexcept>

namespace railyard::cuda {
namespace {

std::string gb(size_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return s;
}

// The state at three device pointers, read through its owner's copy stream.
class DeviceStateSnapshot final : public StateSnapshot {
 public:
  DeviceStateSnapshot(DeviceSnapshots& owner, const DeviceState& at, int64_t adam_step)
      : owner_(owner), at_(at), adam_step_(adam_step) {}

  size_t total() const override { return at_.total; }
  size_t shard_begin() const override { return at_.shard_begin; }
  size_t shard_end() const override { return at_.shard_end; }
  int64_t adam_step() const override { return adam_step_; }

  void copy_out(StateArray array, size_t begin, size_t count, float* dst) override {
    const size_t at = snapshot_offset(*this, array, begin, count);
    const float* src = array == StateArray::kParams ? at_.master
                       : array == StateArray::kM    ? at_.m
                                                    : at_.v;
    owner_.copy_to_host(src + at, count, dst);
  }
  std::vector<float*> staging(size_t n, size_t bytes) override { return owner_.staging(n, bytes); }

 private:
  DeviceSnapshots& owner_;
  DeviceState at_;
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
  if (bytes() + headroom > free_b) {
    note_ = "ckpt snapshot: no room on the device (needs " + gb(bytes()) + ", " + gb(free_b) +
            " free), periodic saves copy to the host inside the step (slower)";
    return;
  }
  reserve_ = DeviceBuffer(bytes());
  // Page-locked now: pinning on the writer thread during the first save could hold up the
  // training thread's CUDA calls.
  staging(kStagingBuffers, kStagingBytes);
  note_ = "ckpt snapshot " + gb(bytes()) + " on device, " +
          gb(kStagingBuffers * kStagingBytes) + " page-locked staging";
}

DeviceSnapshots::~DeviceSnapshots() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (copied_ != nullptr) cudaEventDestroy(copied_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

size_t DeviceSnapshots::bytes() const {
  return (state_.total + 2 * (state_.shard_end - state_.shard_begin)) * sizeof(float);
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
  at.master = reserve_.as<float>();
  at.m = at.master + state_.total;
  at.v = at.m + n;
  RY_CUDA(cudaEventRecord(ready_, compute));
  RY_CUDA(cudaStreamWaitEvent(stream_, ready_, 0));
  RY_CUDA(cudaMemcpyAsync(const_cast<float*>(at.master), state_.master,
                          state_.total * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  RY_CUDA(cudaMemcpyAsync(const_cast<float*>(at.m), state_.m, n * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_));
  RY_CUDA(cudaMemcpyAsync(const_cast<float*>(at.v), state_.v, n * sizeof(float),
                          cudaMemcpyDeviceToDevice, stream_));
  RY_CUDA(cudaEventRecord(copied_, stream_));
  // The next optimizer step must not overwrite the state before it is copied.
  RY_CUDA(cudaStreamWaitEvent(compute, copied_, 0));
  auto snap = std::make_shared<DeviceStateSnapshot>(*this, at, adam_step);
  live_ = snap;
  return snap;
}

std::shared_ptr<StateSnapshot> DeviceSnapshots::view(cudaStream_t compute, int64_t adam_step) {
  RY_CUDA(cudaStreamSynchronize(compute));
  return std::make_shared<DeviceStateSnapshot>(*this, state_, adam_step);
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
