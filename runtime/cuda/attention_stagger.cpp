#include "attention_stagger.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace railyard::cuda {

namespace {

Stagger kept(std::string why) {
  Stagger s;
  s.why = std::move(why);
  return s;
}

// The memsets of `captured` that start in [region, region + bytes), as spans from its start, by
// address; `odd` says why where one of them is no memset of zeros to consecutive bytes inside
// the region (one that hoist_scratch_memsets could not take) or comes after other work of the
// call (whose earlier kernels might touch its bytes: the stagger proves nothing for those).
std::vector<ByteSpan> region_memsets(const std::vector<CapturedMemset>& captured,
                                     const void* region, size_t bytes, std::string& odd) {
  const auto lo = reinterpret_cast<uintptr_t>(region), hi = lo + bytes;
  std::vector<ByteSpan> out;
  for (const CapturedMemset& c : captured) {
    const auto dst = reinterpret_cast<uintptr_t>(c.params.dst);
    if (dst < lo || dst >= hi) continue;
    const auto zeroed = zeroed_bytes(c.params);
    if (!zeroed) {
      odd = "a memset not of zeros to consecutive bytes";
    } else if (zeroed->second > hi) {
      odd = "a memset across the region's end";
    } else if (!c.leading) {
      odd = "a memset after the call's kernels";
    } else {
      out.push_back({zeroed->first - lo, zeroed->second - lo});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ByteSpan& a, const ByteSpan& b) { return a.begin < b.begin; });
  return out;
}

// The memsets of call `call` of `k` with its workspace at `offset`, captured.
std::vector<ByteSpan> probe(cudaStream_t stream, void* region, size_t region_bytes,
                            const WorkspaceCalls& k, int call, size_t offset, std::string& odd) {
  return region_memsets(captured_memsets(stream, [&] { k.launch(call, offset); }), region,
                        region_bytes, odd);
}

// The stagger of `k` from its first call's memsets (at the region's start), placed in the region.
StaggeredCalls plan_kind(cudaStream_t stream, void* region, size_t region_bytes, size_t budget,
                         const WorkspaceCalls& k) {
  StaggeredCalls c;
  c.workspace = k.workspace;
  k.launch(0, 0);  // eagerly: what the library loads or builds lazily, outside any capture
  std::string odd;
  c.memsets = probe(stream, region, region_bytes, k, 0, 0, odd);
  c.stagger = odd.empty() ? plan_stagger(k.calls, k.workspace, c.memsets, budget) : kept(odd);
  if (!place_in_region(c, k.calls, region_bytes)) {
    c.stagger = kept("does not fit the region");
    c.base = 0;
  }
  return c;
}

// Why `c` cannot be kept ("" where it can): each call, captured at its staggered workspace, must
// issue the first call's memsets moved with it, and they must be exclusive (memsets_exclusive).
std::string verify(cudaStream_t stream, void* region, size_t region_bytes, const WorkspaceCalls& k,
                   const StaggeredCalls& c, const std::vector<ByteSpan>& others) {
  std::vector<ByteSpan> workspaces;
  std::vector<std::vector<ByteSpan>> memsets;
  for (int j = 0; j < k.calls; ++j) {
    std::string odd;
    memsets.push_back(probe(stream, region, region_bytes, k, j, c.offset(j, k.calls), odd));
    if (!odd.empty()) return odd;
    if (memsets.back() != c.memsets_of(j, k.calls)) {
      return "call " + std::to_string(j) + "'s memsets did not move with it";
    }
    workspaces.push_back(c.workspace_of(j, k.calls));
  }
  if (!memsets_exclusive(workspaces, memsets, others)) return "memsets not exclusive";
  return "";
}

// The first guarded kind that staggers; kinds.size() where none.
size_t guarded_kind(const std::vector<WorkspaceCalls>& kinds, const WorkspaceStagger& out) {
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (kinds[i].guarded && out.kinds[i].stagger.order != StaggerOrder::kKeep) return i;
  }
  return kinds.size();
}

}  // namespace

std::string WorkspaceStagger::describe() const {
  std::string s;
  for (size_t i = 0; i < kinds.size(); ++i) {
    s += (i == 0 ? "" : "; ") + names[i] + " " + kinds[i].stagger.describe();
  }
  return s;
}

WorkspaceStagger stagger_workspaces(cudaStream_t stream, void* region, size_t region_bytes,
                                    size_t apart_bytes, size_t budget,
                                    const std::vector<WorkspaceCalls>& kinds) {
  WorkspaceStagger out;
  for (const WorkspaceCalls& k : kinds) {
    out.names.push_back(k.name);
    out.kinds.push_back(plan_kind(stream, region, region_bytes, budget, k));
  }
  const size_t g = guarded_kind(kinds, out);
  if (g < kinds.size()) out.apart = place_apart(out.kinds[g], apart_bytes, region_bytes);
  const ByteSpan apart{out.apart, out.apart + apart_bytes};
  for (size_t i = 0; i < kinds.size(); ++i) {
    StaggeredCalls& c = out.kinds[i];
    if (c.stagger.order == StaggerOrder::kKeep) continue;
    const std::string why =
        verify(stream, region, region_bytes, kinds[i], c,
               kinds[i].guarded ? std::vector<ByteSpan>{apart} : std::vector<ByteSpan>{});
    if (!why.empty()) {
      c.stagger = kept(why);
      c.base = 0;
    }
  }
  // Where no guarded kind staggers after all, the other buffer goes back to the start (where a
  // later guarded one still does, it was verified against this place).
  if (guarded_kind(kinds, out) == kinds.size()) out.apart = 0;
  out.hoist.resize(kinds.size());
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (out.kinds[i].stagger.order == StaggerOrder::kKeep) continue;
    for (int j = 0; j < kinds[i].calls; ++j) {
      for (const ByteSpan& m : out.kinds[i].memsets_of(j, kinds[i].calls)) {
        out.hoist[i].push_back({static_cast<const char*>(region) + m.begin, m.end - m.begin});
      }
    }
  }
  return out;
}

}  // namespace railyard::cuda
