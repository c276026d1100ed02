#pragma once
// Tokens and targets to the device: staged in page-locked host memory and copied on a stream
// of their own, so the copy runs beside compute and the compute stream only waits on an event.

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "device_buffer.hpp"

namespace railyard::cuda {

class InputPipeline {
 public:
  // Room for `max_positions` tokens and as many targets, in `device` memory the caller owns.
  InputPipeline(size_t max_positions, int32_t* device_tokens, int32_t* device_targets);
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // Copies the batch to the device; work queued on `compute` afterwards sees it. The host
  // spans may be reused as soon as this returns.
  void stage(std::span<const int32_t> tokens, std::span<const int32_t> targets,
             cudaStream_t compute);

 private:
  size_t max_;
  int32_t* d_tokens_;
  int32_t* d_targets_;
  PinnedBuffer host_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t copied_ = nullptr;
};

}  // namespace railyard::cuda
