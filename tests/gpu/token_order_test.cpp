// The embedding backward's token order (token_order.hpp): the positions of a stable sort by
// token, and a clear error for a token outside the vocabulary. (Its host time is off the step's
// critical path: the engine sorts while the GPU runs the forward.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "token_order.hpp"

namespace railyard::cuda {
namespace {

void expect_stable_sort(const std::vector<int32_t>& tok, int vocab) {
  std::vector<uint32_t> keys(tok.size()), pos(tok.size());
  TokenOrder(vocab).sort(tok, keys.data(), pos.data());
  std::vector<uint32_t> want(tok.size());
  std::iota(want.begin(), want.end(), 0u);
  std::stable_sort(want.begin(), want.end(),
                   [&](uint32_t a, uint32_t b) { return tok[a] < tok[b]; });
  ASSERT_EQ(pos, want);
  for (size_t i = 0; i < tok.size(); ++i) ASSERT_EQ(keys[i], uint32_t(tok[pos[i]])) << i;
}

TEST(TokenOrder, EqualsStableSortByToken) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int32_t> pick(0, 50256);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int32_t> tok(16384);
  for (auto& t : tok) t = pick(rng);
  expect_stable_sort(tok, 50257);
  for (auto& t : tok) t = u(rng) < 0.09 ? 50256 : pick(rng);  // one token 9% of the batch
  expect_stable_sort(tok, 50257);
  expect_stable_sort({0, 0, 0}, 1);
  expect_stable_sort({}, 7);
}

TEST(TokenOrder, ReusedForBatchesOfOtherSizes) {
  TokenOrder order(10);
  std::vector<uint32_t> keys(6), pos(6);
  order.sort(std::vector<int32_t>{9, 1, 9, 0, 1, 9}, keys.data(), pos.data());
  EXPECT_EQ(pos, (std::vector<uint32_t>{3, 1, 4, 0, 2, 5}));
  order.sort(std::vector<int32_t>{2, 2}, keys.data(), pos.data());
  EXPECT_EQ(keys[0], 2u);
  EXPECT_EQ(keys[1], 2u);
  EXPECT_EQ(pos[0], 0u);
  EXPECT_EQ(pos[1], 1u);
}

void expect_rejected(int32_t bad) {
  std::vector<uint32_t> keys(3), pos(3);
  try {
    TokenOrder(50257).sort(std::vector<int32_t>{1, bad, 2}, keys.data(), pos.data());
    FAIL() << "token " << bad << " was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("token " + std::to_string(bad) + " at position 1"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("[0, 50257)"), std::string::npos) << msg;
  }
}

TEST(TokenOrder, RejectsTokensOutsideTheVocabulary) {
  expect_rejected(50257);
  expect_rejected(-1);
  EXPECT_THROW(TokenOrder(0), std::invalid_argument);
}

}  // namespace
}  // namespace railyard::cuda
