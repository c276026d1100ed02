#pragma once
// Tokens and targets to the device: staged in page-locked host memory and copied on a stream
// of their own into one of two device slots, so the next batch's copy runs while the current
// step still computes on the other slot; the compute stream only waits on an event.

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <span>
#include <utility>

#include "device_buffer.hpp"

namespace railyard::cuda {

class InputPipeline {
 public:
  // Two slots of `max_positions` tokens and as many targets, in device memory the caller owns.
  InputPipeline(size_t max_positions, std::array<int32_t*, 2> device_tokens,
                std::array<int32_t*, 2> device_targets);
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // Copies the batch to the device and returns where (tokens, targets); work queued on
  // `compute` afterwards sees it. The host spans may be reused as soon as this returns.
  std::pair<const int32_t*, const int32_t*> stage(std::span<const int32_t> tokens,
                                                  std::span<const int32_t> targets,
                                                  cudaStream_t compute);

 private:
  size_t max_;
  std::array<int32_t*, 2> d_tokens_, d_targets_;
  std::array<PinnedBuffer, 2> host_;
  std::array<cudaEvent_t, 2> copied_{}, released_{};
  cudaStream_t stream_ = nullptr;
  int slot_ = 0;  // the slot the last stage() filled
};

}  // namespace railyard::cuda
