#include "input_pipeline.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"

namespace railyard::cuda {

InputPipeline::InputPipeline(size_t max_positions, int32_t* device_tokens, int32_t* device_targets)
    : max_(max_positions),
      d_tokens_(device_tokens),
      d_targets_(device_targets),
      host_(2 * max_positions * sizeof(int32_t)) {
  RY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  RY_CUDA(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
}

InputPipeline::~InputPipeline() {
  if (copied_ != nullptr) cudaEventDestroy(copied_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void InputPipeline::stage(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                          cudaStream_t compute) {
  size_t n = tokens.size();
  if (n > max_ || targets.size() != n) {
    throw std::invalid_argument("CUDA engine: a batch of " + std::to_string(n) + " tokens and " +
                                std::to_string(targets.size()) + " targets does not fit the " +
                                std::to_string(max_) + " positions planned (--batch x --seq)");
  }
  // The previous batch's copy must be done before its staging memory is overwritten.
  RY_CUDA(cudaEventSynchronize(copied_));
  int32_t* h = host_.as<int32_t>();
  std::memcpy(h, tokens.data(), n * sizeof(int32_t));
  std::memcpy(h + max_, targets.data(), n * sizeof(int32_t));
  // The device buffers may still be read by the previous step's kernels.
  RY_CUDA(cudaEventRecord(copied_, compute));
  RY_CUDA(cudaStreamWaitEvent(stream_, copied_, 0));
  RY_CUDA(cudaMemcpyAsync(d_tokens_, h, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  RY_CUDA(
      cudaMemcpyAsync(d_targets_, h + max_, n * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  RY_CUDA(cudaEventRecord(copied_, stream_));
  RY_CUDA(cudaStreamWaitEvent(compute, copied_, 0));
}

}  // namespace railyard::cuda
