// The Hungarian method with potentials (shortest augmenting paths), rows added one at a time.

#include "railyard/assignment.hpp"

#include <limits>
#include <stdexcept>
#include <string>

namespace railyard {

std::vector<int> min_cost_assignment(const std::vector<std::vector<std::int64_t>>& cost) {
  const size_t rows = cost.size();
  if (rows == 0) return {};
  const size_t cols = cost[0].size();
  for (const auto& row : cost) {
    if (row.size() != cols) throw std::invalid_argument("assignment: rows differ in length");
  }
  if (rows > cols) {
    throw std::invalid_argument("assignment: " + std::to_string(rows) + " rows but only " +
                                std::to_string(cols) + " columns");
  }
  constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max() / 4;
  // 1-based with a virtual column 0, as in the classic formulation.
  std::vector<std::int64_t> u(rows + 1, 0);
  std::vector<std::int64_t> v(cols + 1, 0);
  std::vector<size_t> owner(cols + 1, 0);  // row holding each column, 0 = free
  std::vector<size_t> way(cols + 1, 0);
  for (size_t r = 1; r <= rows; ++r) {
    owner[0] = r;
    size_t col = 0;
    std::vector<std::int64_t> min_to(cols + 1, kInf);
    std::vector<bool> used(cols + 1, false);
    do {
      used[col] = true;
      const size_t row = owner[col];
      std::int64_t delta = kInf;
      size_t next = 0;
      for (size_t c = 1; c <= cols; ++c) {
        if (used[c]) continue;
        const std::int64_t reduced = cost[row - 1][c - 1] - u[row] - v[c];
        if (reduced < min_to[c]) {
          min_to[c] = reduced;
          way[c] = col;
        }
        if (min_to[c] < delta) {
          delta = min_to[c];
          next = c;
        }
      }
      for (size_t c = 0; c <= cols; ++c) {
        if (used[c]) {
          u[owner[c]] += delta;
          v[c] -= delta;
        } else {
          min_to[c] -= delta;
        }
      }
      col = next;
    } while (owner[col] != 0);
    do {
      const size_t prev = way[col];
      owner[col] = owner[prev];
      col = prev;
    } while (col != 0);
  }
  std::vector<int> result(rows, -1);
  for (size_t c = 1; c <= cols; ++c) {
    if (owner[c] != 0) result[owner[c] - 1] = static_cast<int>(c - 1);
  }
  return result;
}

}  // namespace railyard
