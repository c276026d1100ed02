#pragma once
// Tokens and targets to the device, with the order the embedding backward sums in (positions
// sorted by token, token_order.hpp): staged in page-locked host memory and copied on a stream of
// their own into one of two device slots, so the next batch's copy runs while the current step
// still computes on the other slot; the compute stream only waits on an event.

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <span>

#include "device_buffer.hpp"
#include "token_order.hpp"

namespace railyard::cuda {

// A staged batch of n positions: rows of `max_positions` values (the slot's pitch), the first
// n of each in use.
enum BatchRow { kTokensRow, kTargetsRow, kSortedTokensRow, kSortedPositionsRow, kBatchRows };

class InputPipeline {
 public:
  // Two slots of kBatchRows rows of `max_positions` 32-bit values each, in device memory the
  // caller owns; tokens lie below `vocab`.
  InputPipeline(size_t max_positions, int vocab, std::array<int32_t*, 2> device_slots);
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // Copies the batch and its token order to the device and returns the slot that holds them
  // (BatchRow); work queued on `compute` afterwards sees it. The host spans may be reused as
  // soon as this returns.
  const int32_t* stage(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       cudaStream_t compute);

 private:
  size_t max_;
  TokenOrder order_;
  std::array<int32_t*, 2> d_slots_;
  std::array<PinnedBuffer, 2> host_;
  std::array<cudaEvent_t, 2> copied_{}, released_{};
  cudaStream_t stream_ = nullptr;
  int slot_ = 0;  // the slot the last stage() filled
};

}  // namespace railyard::cuda
