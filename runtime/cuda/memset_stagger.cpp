#include "memset_stagger.hpp"

#include <algorithm>

namespace railyard::cuda {

namespace {

size_t round_up(size_t bytes) {
  return (bytes + kStaggerAlign - 1) / kStaggerAlign * kStaggerAlign;
}

size_t round_down(size_t bytes) {
  return bytes / kStaggerAlign * kStaggerAlign;
}

Stagger keep(std::string why) {
  Stagger s;
  s.why = std::move(why);
  return s;
}

}  // namespace

size_t Stagger::offset(int call, int calls) const {
  switch (order) {
    case StaggerOrder::kLaterLower:
      return size_t(calls - 1 - call) * stride;
    case StaggerOrder::kLaterHigher:
      return size_t(call) * stride;
    case StaggerOrder::kKeep:
      break;
  }
  return 0;
}

size_t Stagger::extent(int calls, size_t workspace) const {
  return order == StaggerOrder::kKeep ? workspace : workspace + size_t(calls - 1) * stride;
}

std::string Stagger::describe() const {
  if (order == StaggerOrder::kKeep) return "kept (" + why + ")";
  return std::to_string(stride) + " B apart, later " +
         (order == StaggerOrder::kLaterLower ? "lower" : "higher");
}

Stagger plan_stagger(int calls, size_t workspace, const std::vector<ByteSpan>& memsets,
                     size_t budget) {
  if (calls < 1 || memsets.empty()) return keep("no memsets in the workspace");
  size_t lo = workspace, hi = 0;
  for (const ByteSpan& m : memsets) {
    if (m.begin >= m.end || m.end > workspace) return keep("a memset outside the workspace");
    lo = std::min(lo, m.begin);
    hi = std::max(hi, m.end);
  }
  // Later calls lower need the stride past the last memset byte; higher, past W - the first.
  const size_t lower = round_up(hi), higher = round_up(workspace - lo);
  Stagger s;
  s.order = lower <= higher ? StaggerOrder::kLaterLower : StaggerOrder::kLaterHigher;
  s.stride = std::min(lower, higher);
  if (size_t(calls) * s.stride > budget) {
    return keep("needs " + std::to_string(calls) + " x " + std::to_string(s.stride) +
                " B, budget " + std::to_string(budget));
  }
  return s;
}

ByteSpan StaggeredCalls::workspace_of(int call, int calls) const {
  const size_t at = offset(call, calls);
  return {at, at + workspace};
}

std::vector<ByteSpan> StaggeredCalls::memsets_of(int call, int calls) const {
  const size_t at = offset(call, calls);
  std::vector<ByteSpan> out;
  for (const ByteSpan& m : memsets) out.push_back({at + m.begin, at + m.end});
  return out;
}

bool place_in_region(StaggeredCalls& c, int calls, size_t region) {
  const size_t extent = c.stagger.extent(calls, c.workspace);
  if (extent > region) return false;
  c.base = c.stagger.order == StaggerOrder::kLaterHigher ? round_down(region - extent) : 0;
  return true;
}

size_t place_apart(const StaggeredCalls& c, size_t bytes, size_t region) {
  if (c.stagger.order != StaggerOrder::kLaterLower || bytes > region) return 0;
  return round_down(region - bytes);
}

bool memsets_exclusive(const std::vector<ByteSpan>& workspaces,
                       const std::vector<std::vector<ByteSpan>>& memsets,
                       const std::vector<ByteSpan>& others) {
  for (size_t j = 0; j < memsets.size(); ++j) {
    for (const ByteSpan& m : memsets[j]) {
      for (size_t i = 0; i < j && i < workspaces.size(); ++i) {
        if (m.overlaps(workspaces[i])) return false;
      }
      for (const ByteSpan& o : others) {
        if (m.overlaps(o)) return false;
      }
    }
  }
  return true;
}

}  // namespace railyard::cuda
