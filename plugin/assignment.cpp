// The Hungarian method with potentials (shortest augmenting paths), rows added one at a time.

#include "railyard/assignment.hpp"

#include <limits>
#include <stdexcept>
#include <string>

namespace railyard {
namespace {

constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max() / 4;

void check_shape(const std::vector<std::vector<std::int64_t>>& cost) {
  const size_t rows = cost.size();
  const size_t cols = cost[0].size();
  for (const auto& row : cost) {
    if (row.size() != cols) throw std::invalid_argument("assignment: rows differ in length");
  }
  if (rows > cols) {
    throw std::invalid_argument("assignment: " + std::to_string(rows) + " rows but only " +
                                std::to_string(cols) + " columns");
  }
}

// The dual potentials and the matching so far, 1-based with a virtual column 0, as in the
// classic formulation.
struct Matching {
  std::vector<std::int64_t> u;
  std::vector<std::int64_t> v;
  std::vector<size_t> owner;  // row holding each column, 0 = free
  std::vector<size_t> way;    // the previous column on the shortest path to each column

  Matching(size_t rows, size_t cols)
      : u(rows + 1, 0), v(cols + 1, 0), owner(cols + 1, 0), way(cols + 1, 0) {}
};

// The shortest augmenting path from row r (Dijkstra over reduced costs), updating the potentials
// on the way; returns the free column it ends at, its path in m.way.
size_t shortest_path(const std::vector<std::vector<std::int64_t>>& cost, Matching& m, size_t r) {
  const size_t cols = m.v.size() - 1;
  m.owner[0] = r;
  size_t col = 0;
  std::vector<std::int64_t> min_to(cols + 1, kInf);
  std::vector<bool> used(cols + 1, false);
  do {
    used[col] = true;
    const size_t row = m.owner[col];
    std::int64_t delta = kInf;
    size_t next = 0;
    for (size_t c = 1; c <= cols; ++c) {
      if (used[c]) continue;
      const std::int64_t reduced = cost[row - 1][c - 1] - m.u[row] - m.v[c];
      if (reduced < min_to[c]) {
        min_to[c] = reduced;
        m.way[c] = col;
      }
      if (min_to[c] < delta) {
        delta = min_to[c];
        next = c;
      }
    }
    for (size_t c = 0; c <= cols; ++c) {
      if (used[c]) {
        m.u[m.owner[c]] += delta;
        m.v[c] -= delta;
      } else {
        min_to[c] -= delta;
      }
    }
    col = next;
  } while (m.owner[col] != 0);
  return col;
}

// Flips the matching along the path ending at the free column `col`.
void augment(Matching& m, size_t col) {
  do {
    const size_t prev = m.way[col];
    m.owner[col] = m.owner[prev];
    col = prev;
  } while (col != 0);
}

}  // namespace

std::vector<int> min_cost_assignment(const std::vector<std::vector<std::int64_t>>& cost) {
  const size_t rows = cost.size();
  if (rows == 0) return {};
  check_shape(cost);
  const size_t cols = cost[0].size();
  Matching m(rows, cols);
  for (size_t r = 1; r <= rows; ++r) augment(m, shortest_path(cost, m, r));
  std::vector<int> result(rows, -1);
  for (size_t c = 1; c <= cols; ++c) {
    if (m.owner[c] != 0) result[m.owner[c] - 1] = static_cast<int>(c - 1);
  }
  return result;
}

}  // namespace railyard
