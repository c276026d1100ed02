// The minimum-cost assignment against brute force on small matrices.

#include "railyard/assignment.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>

namespace railyard {
namespace {

std::int64_t total(const std::vector<std::vector<std::int64_t>>& cost, const std::vector<int>& a) {
  std::int64_t sum = 0;
  for (size_t r = 0; r < a.size(); ++r) sum += cost[r][a[r]];
  return sum;
}

std::int64_t brute_force(const std::vector<std::vector<std::int64_t>>& cost) {
  std::vector<int> cols(cost[0].size());
  std::iota(cols.begin(), cols.end(), 0);
  std::int64_t best = INT64_MAX;
  do {
    std::int64_t sum = 0;
    for (size_t r = 0; r < cost.size(); ++r) sum += cost[r][cols[r]];
    best = std::min(best, sum);
  } while (std::next_permutation(cols.begin(), cols.end()));
  return best;
}

TEST(Assignment, MatchesBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t rows = 1 + rng() % 5;
    const size_t cols = rows + rng() % 3;
    std::vector<std::vector<std::int64_t>> cost(rows, std::vector<std::int64_t>(cols));
    for (auto& row : cost) {
      for (auto& c : row) c = static_cast<std::int64_t>(rng() % 41) - 20;
    }
    const std::vector<int> a = min_cost_assignment(cost);
    ASSERT_EQ(a.size(), rows);
    EXPECT_EQ(std::set<int>(a.begin(), a.end()).size(), rows) << "columns reused";
    EXPECT_EQ(total(cost, a), brute_force(cost)) << "trial " << trial;
  }
}

TEST(Assignment, RejectsMoreRowsThanColumns) {
  EXPECT_THROW(min_cost_assignment({{1}, {2}}), std::invalid_argument);
  EXPECT_THROW(min_cost_assignment({{1, 2}, {3}}), std::invalid_argument);
  EXPECT_TRUE(min_cost_assignment({}).empty());
}

}  // namespace
}  // namespace railyard
