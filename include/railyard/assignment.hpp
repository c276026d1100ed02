#pragma once
// Minimum-cost assignment (the Hungarian method): the planner uses it to give tasks the GPUs
// nearest their cpus while keeping every GPU equally loaded.

#include <cstdint>
#include <vector>

namespace railyard {

// cost[r][c] for rows r < R and columns c < C, R <= C, every row the same length. Returns, per
// row, the distinct column it gets, minimising the total cost. O(R * R * C).
// Throws std::invalid_argument when R > C or the rows differ in length.
std::vector<int> min_cost_assignment(const std::vector<std::vector<std::int64_t>>& cost);

}  // namespace railyard
