#pragma once
// Tokens and targets to the device, then the order the embedding backward sums in (positions
// sorted by token, token_order.hpp): staged in page-locked host memory and copied on a stream of
// their own, so the compute stream only waits on an event. Tokens and targets go to one of two
// device slots, so the next batch's copy runs while the current step still computes on the other
// slot. The order is needed only by the backward: it is sorted after the forward is queued, while
// the GPU computes, instead of between the steps, where the GPU would wait for the host.

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <span>

#include "device_buffer.hpp"
#include "token_order.hpp"

namespace railyard::cuda {

// A staged batch of n positions: rows of `max_positions` values (the slot's pitch), the first
// n of each in use. A slot holds the first kInputRows rows; the order rows follow them.
enum BatchRow { kTokensRow, kTargetsRow, kSortedTokensRow, kSortedPositionsRow, kBatchRows };
inline constexpr int kInputRows = kSortedTokensRow;

class InputPipeline {
 public:
  // Two slots of kInputRows rows of `max_positions` 32-bit values each, in device memory the
  // caller owns; tokens lie below `vocab`.
  InputPipeline(size_t max_positions, int vocab, std::array<int32_t*, 2> device_slots);
  ~InputPipeline();
  InputPipeline(const InputPipeline&) = delete;
  InputPipeline& operator=(const InputPipeline&) = delete;

  // Copies the batch's tokens and targets to the device and returns the slot that holds them
  // (kTokensRow, kTargetsRow); work queued on `compute` afterwards sees it. The host spans may
  // be reused as soon as this returns.
  const int32_t* stage(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       cudaStream_t compute);
  // The token order of the batch stage() took last (the same `tokens`), sorted on the host and
  // copied into `rows`: kSortedTokensRow then kSortedPositionsRow, `max_positions` apart. The
  // copy waits for everything queued on `compute` before that stage(); work queued on `compute`
  // afterwards sees it. Work queued between the two calls must not touch `rows`.
  void stage_order(std::span<const int32_t> tokens, int32_t* rows, cudaStream_t compute);

  // The other way to the same order (the engine's kOrderCopyInBackward): sort_order sorts it on
  // the host only; copy_order_begin, queued on `compute` where the work that reads `rows` starts
  // (the backward, in a graph or not), forks the copy into `rows` onto the pipeline's stream, a
  // branch of that graph that runs beside the kernels, and copy_order_end, queued before the first
  // reader, joins it back: no event wait between two graphs. The copy reads the host staging of
  // the slot stage() filled last, so a graph of those calls is one per slot (last_slot()). A
  // slot's staging is rewritten only after all work queued before the next stage() is done.
  void sort_order(std::span<const int32_t> tokens);
  void copy_order_begin(int32_t* rows, cudaStream_t compute);
  void copy_order_end(cudaStream_t compute);
  int last_slot() const { return slot_; }

 private:
  // The order sort_order left in the last slot's staging into `rows`, queued on stream_.
  void copy_order(int32_t* rows);

  size_t max_;
  TokenOrder order_;
  std::array<int32_t*, 2> d_slots_;
  std::array<PinnedBuffer, 2> host_;
  // copied_[k]: slot k's last copies are done. released_[k]: recorded when the slot after k was
  // staged, behind everything queued before that batch.
  std::array<cudaEvent_t, 2> copied_{}, released_{};
  cudaEvent_t fork_ = nullptr, join_ = nullptr;  // copy_order_begin/end's, never waited on by host
  size_t sorted_ = 0;                            // positions sort_order sorted
  cudaStream_t stream_ = nullptr;
  int slot_ = 0;  // the slot the last stage() filled
};

}  // namespace railyard::cuda
