#include "input_pipeline.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"

namespace railyard::cuda {

InputPipeline::InputPipeline(size_t max_positions, int vocab, std::array<int32_t*, 2> device_slots)
    : max_(max_positions), order_(vocab), d_slots_(device_slots) {
  RY_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  for (int k = 0; k < 2; ++k) {
    host_[k] = PinnedBuffer(kBatchRows * max_positions * sizeof(int32_t));
    RY_CUDA(cudaEventCreateWithFlags(&copied_[k], cudaEventDisableTiming));
    RY_CUDA(cudaEventCreateWithFlags(&released_[k], cudaEventDisableTiming));
  }
  RY_CUDA(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  RY_CUDA(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
}

InputPipeline::~InputPipeline() {
  for (int k = 0; k < 2; ++k) {
    if (copied_[k] != nullptr) cudaEventDestroy(copied_[k]);
    if (released_[k] != nullptr) cudaEventDestroy(released_[k]);
  }
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (join_ != nullptr) cudaEventDestroy(join_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

const int32_t* InputPipeline::stage(std::span<const int32_t> tokens,
                                    std::span<const int32_t> targets, cudaStream_t compute) {
  size_t n = tokens.size();
  if (n > max_ || targets.size() != n) {
    throw std::invalid_argument("CUDA engine: a batch of " + std::to_string(n) + " tokens and " +
                                std::to_string(targets.size()) + " targets does not fit the " +
                                std::to_string(max_) + " positions planned (--batch x --seq)");
  }
  // Everything queued so far used at most the last slot: mark when it is free again.
  RY_CUDA(cudaEventRecord(released_[slot_], compute));
  slot_ ^= 1;
  const int k = slot_;
  // This slot's previous copies read the staging memory; they finished long ago, but make sure
  // (copy_order_begin's, queued before the stage() after that slot's, are behind released_).
  RY_CUDA(cudaEventSynchronize(copied_[k]));
  RY_CUDA(cudaEventSynchronize(released_[k]));
  int32_t* h = host_[k].as<int32_t>();
  std::memcpy(h + kTokensRow * max_, tokens.data(), n * sizeof(int32_t));
  std::memcpy(h + kTargetsRow * max_, targets.data(), n * sizeof(int32_t));
  // The slot may still be read by work queued two batches ago.
  RY_CUDA(cudaStreamWaitEvent(stream_, released_[k], 0));
  const size_t pitch = max_ * sizeof(int32_t);
  RY_CUDA(cudaMemcpy2DAsync(d_slots_[k], pitch, h, pitch, n * sizeof(int32_t), kInputRows,
                            cudaMemcpyHostToDevice, stream_));
  RY_CUDA(cudaEventRecord(copied_[k], stream_));
  RY_CUDA(cudaStreamWaitEvent(compute, copied_[k], 0));
  return d_slots_[k];
}

void InputPipeline::stage_order(std::span<const int32_t> tokens, int32_t* rows,
                                cudaStream_t compute) {
  sort_order(tokens);
  const int k = slot_;
  // `rows` may still be read by work queued before this batch's stage().
  RY_CUDA(cudaStreamWaitEvent(stream_, released_[k ^ 1], 0));
  copy_order(rows);
  RY_CUDA(cudaEventRecord(copied_[k], stream_));
  RY_CUDA(cudaStreamWaitEvent(compute, copied_[k], 0));
}

void InputPipeline::sort_order(std::span<const int32_t> tokens) {
  if (tokens.size() > max_) {
    throw std::invalid_argument("CUDA engine: the token order of " + std::to_string(tokens.size()) +
                                " positions does not fit the " + std::to_string(max_) + " planned");
  }
  int32_t* h = host_[slot_].as<int32_t>();
  order_.sort(tokens, reinterpret_cast<uint32_t*>(h + kSortedTokensRow * max_),
              reinterpret_cast<uint32_t*>(h + kSortedPositionsRow * max_));
  sorted_ = tokens.size();
}

void InputPipeline::copy_order(int32_t* rows) {
  const int32_t* h = host_[slot_].as<int32_t>();
  const size_t pitch = max_ * sizeof(int32_t);
  RY_CUDA(cudaMemcpy2DAsync(rows, pitch, h + kSortedTokensRow * max_, pitch,
                            sorted_ * sizeof(int32_t), kBatchRows - kInputRows,
                            cudaMemcpyHostToDevice, stream_));
}

void InputPipeline::copy_order_begin(int32_t* rows, cudaStream_t compute) {
  RY_CUDA(cudaEventRecord(fork_, compute));
  RY_CUDA(cudaStreamWaitEvent(stream_, fork_, 0));
  copy_order(rows);
  RY_CUDA(cudaEventRecord(join_, stream_));
}

void InputPipeline::copy_order_end(cudaStream_t compute) {
  RY_CUDA(cudaStreamWaitEvent(compute, join_, 0));
}

}  // namespace railyard::cuda
