#pragma once
// The order in which the embedding backward sums each vocabulary row's gradient: positions
// sorted by token, ties by position. A stable counting sort on the host, O(N + vocab), run when
// the batch is staged, so that the step has no sort on the GPU.

#include <cstdint>
#include <span>
#include <vector>

namespace railyard::cuda {

class TokenOrder {
 public:
  explicit TokenOrder(int vocab);

  // sorted_tokens[i] is the i-th token by (token, position) and sorted_positions[i] its
  // position; both hold tokens.size() entries. Throws std::invalid_argument naming the
  // position of a token outside [0, vocab).
  void sort(std::span<const int32_t> tokens, uint32_t* sorted_tokens, uint32_t* sorted_positions);

 private:
  int vocab_;
  std::vector<uint32_t> next_;  // per token: its count, then where its next position goes
};

}  // namespace railyard::cuda
