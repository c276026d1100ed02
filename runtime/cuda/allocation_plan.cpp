#include "allocation_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace railyard::cuda {

size_t AllocationPlan::add(const std::string& name, size_t bytes) {
  size_t offset = total_;
  entries_.push_back({name, offset, bytes});
  total_ += aligned(bytes);
  return offset;
}

std::vector<std::vector<size_t>> AllocationPlan::add_overlaid(
    const std::string& name, const std::vector<std::vector<size_t>>& groups) {
  std::vector<std::vector<size_t>> rel(groups.size());
  size_t largest = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    size_t at = 0;
    for (size_t bytes : groups[g]) {
      rel[g].push_back(at);
      at += aligned(bytes);
    }
    largest = std::max(largest, at);
  }
  const size_t base = add(name, largest);
  for (auto& group : rel) {
    for (size_t& off : group) off += base;
  }
  return rel;
}

std::string AllocationPlan::summary(size_t top) const {
  // Entries named "layer N: what" are summed per "what" so the report stays short.
  std::map<std::string, size_t> by_kind;
  for (const Entry& e : entries_) {
    auto colon = e.name.find(": ");
    by_kind[colon == std::string::npos ? e.name : e.name.substr(colon + 2)] += e.bytes;
  }
  std::vector<std::pair<std::string, size_t>> sorted(by_kind.begin(), by_kind.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string out;
  char line[160];
  for (size_t i = 0; i < sorted.size() && i < top; ++i) {
    std::snprintf(line, sizeof(line), "  %-28s %9.1f MiB\n", sorted[i].first.c_str(),
                  double(sorted[i].second) / (1 << 20));
    out += line;
  }
  std::snprintf(line, sizeof(line), "  %-28s %9.1f MiB", "total", double(total_) / (1 << 20));
  return out + line;
}

}  // namespace railyard::cuda
