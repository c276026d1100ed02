#include "token_order.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace railyard::cuda {

TokenOrder::TokenOrder(int vocab) : vocab_(vocab), next_(size_t(vocab > 0 ? vocab : 0)) {
  if (vocab < 1) {
    throw std::invalid_argument("TokenOrder: vocabulary of " + std::to_string(vocab) +
                                " tokens: it needs at least one (--vocab)");
  }
}

void TokenOrder::sort(std::span<const int32_t> tokens, uint32_t* sorted_tokens,
                      uint32_t* sorted_positions) {
  std::fill(next_.begin(), next_.end(), 0u);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (t < 0 || t >= vocab_) {
      throw std::invalid_argument("TokenOrder: token " + std::to_string(t) + " at position " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(vocab_) +
                                  "); check the data's vocabulary");
    }
    ++next_[size_t(t)];
  }
  uint32_t start = 0;  // exclusive prefix sum: where each token's run begins
  for (uint32_t& n : next_) {
    const uint32_t count = n;
    n = start;
    start += count;
  }
  // Positions in ascending order: each run lists its positions ascending (stable).
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t t = uint32_t(tokens[i]), at = next_[t]++;
    sorted_tokens[at] = t;
    sorted_positions[at] = uint32_t(i);
  }
}

}  // namespace railyard::cuda
