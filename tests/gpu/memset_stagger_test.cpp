// The staggered workspaces' placement (memset_stagger.hpp), on the host: which order and stride
// each layout of memsets gets, the fallbacks, and, for many random layouts, that every call's
// memsets are its own (no earlier call's workspace and not the other buffer reach them), checked
// by brute force, byte range against byte range.
#include "memset_stagger.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace railyard::cuda {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kBudget = 4 * kMiB;

// Whether [a, a + n) and [b, b + m) share a byte, by enumeration of the smaller (brute force,
// independent of ByteSpan::overlaps).
bool share_a_byte(size_t a, size_t n, size_t b, size_t m) {
  if (n > m) return share_a_byte(b, m, a, n);
  for (size_t x = a; x < a + n; ++x) {
    if (x >= b && x < b + m) return true;
  }
  return false;
}

// Places `calls` calls in a region that also holds a buffer of `other` bytes, as the engine does,
// and checks by brute force that each call's memsets are its own and everything fits.
void expect_exclusive(int calls, size_t workspace, const std::vector<ByteSpan>& memsets,
                      size_t other) {
  StaggeredCalls c;
  c.workspace = workspace;
  c.memsets = memsets;
  c.stagger = plan_stagger(calls, workspace, memsets, kBudget);
  ASSERT_NE(c.stagger.order, StaggerOrder::kKeep) << c.stagger.why;
  const size_t region = std::max(workspace, other) + kBudget + kStaggerAlign;
  ASSERT_TRUE(place_in_region(c, calls, region));
  const size_t apart = place_apart(c, other, region);
  ASSERT_LE(apart + other, region);
  EXPECT_EQ(apart % kStaggerAlign, 0u);
  std::vector<ByteSpan> workspaces;
  std::vector<std::vector<ByteSpan>> per_call;
  for (int j = 0; j < calls; ++j) {
    const size_t at = c.offset(j, calls);
    EXPECT_EQ(at % kStaggerAlign, 0u);
    ASSERT_LE(at + workspace, region) << "call " << j;
    for (const ByteSpan& m : memsets) {
      EXPECT_FALSE(share_a_byte(at + m.begin, m.end - m.begin, apart, other)) << "call " << j;
      for (int i = 0; i < j; ++i) {
        EXPECT_FALSE(share_a_byte(at + m.begin, m.end - m.begin, c.offset(i, calls), workspace))
            << "call " << j << "'s memset in call " << i << "'s workspace";
      }
    }
    workspaces.push_back(c.workspace_of(j, calls));
    per_call.push_back(c.memsets_of(j, calls));
  }
  EXPECT_TRUE(memsets_exclusive(workspaces, per_call, {{apart, apart + other}}));
}

TEST(MemsetStagger, MemsetsNearTheStartPutLaterCallsLower) {
  const Stagger s = plan_stagger(12, kMiB, {{0, 64}, {512, 520}}, kBudget);
  EXPECT_EQ(s.order, StaggerOrder::kLaterLower);
  EXPECT_EQ(s.stride, 768u);  // past the last memset byte, rounded to 256
  EXPECT_EQ(s.offset(0, 12), 11 * 768u);
  EXPECT_EQ(s.offset(11, 12), 0u);
  EXPECT_EQ(s.extent(12, kMiB), kMiB + 11 * 768u);
  EXPECT_EQ(s.describe(), "768 B apart, later lower");
  expect_exclusive(12, kMiB, {{0, 64}, {512, 520}}, 3 * kMiB);
}

TEST(MemsetStagger, MemsetsNearTheEndPutLaterCallsHigher) {
  const size_t w = 1000003;  // not a multiple of the alignment
  const Stagger s = plan_stagger(12, w, {{w - 100, w}}, kBudget);
  EXPECT_EQ(s.order, StaggerOrder::kLaterHigher);
  EXPECT_EQ(s.stride, 256u);
  EXPECT_EQ(s.offset(0, 12), 0u);
  EXPECT_EQ(s.offset(5, 12), 5 * 256u);
  expect_exclusive(12, w, {{w - 100, w}}, 100 * kMiB);
}

TEST(MemsetStagger, TheSmallerStrideWins) {
  // 1000..1100 of 4096: lower needs 1280, higher 3328.
  EXPECT_EQ(plan_stagger(12, 4096, {{1000, 1100}}, kBudget).order, StaggerOrder::kLaterLower);
  // 3000..3100 of 4096: lower needs 3328, higher 1280.
  EXPECT_EQ(plan_stagger(12, 4096, {{3000, 3100}}, kBudget).order, StaggerOrder::kLaterHigher);
  expect_exclusive(12, 4096, {{3000, 3100}}, 8192);
}

TEST(MemsetStagger, KeepsWhereTheBudgetIsTooSmall) {
  // Memsets at both ends of a large workspace: either order needs about the whole workspace.
  const Stagger s = plan_stagger(12, 64 * kMiB, {{0, 4}, {64 * kMiB - 4, 64 * kMiB}}, kBudget);
  EXPECT_EQ(s.order, StaggerOrder::kKeep);
  EXPECT_EQ(s.why, "needs 12 x 67108864 B, budget 4194304");
  EXPECT_EQ(s.offset(3, 12), 0u);
  EXPECT_EQ(s.extent(12, 64 * kMiB), 64 * kMiB);
  // 12 x 349,440 B is within 4 MiB, 12 x 349,696 B is not.
  EXPECT_NE(plan_stagger(12, kMiB, {{0, 349440}}, kBudget).order, StaggerOrder::kKeep);
  EXPECT_EQ(plan_stagger(12, kMiB, {{0, 349441}}, kBudget).order, StaggerOrder::kKeep);
}

TEST(MemsetStagger, KeepsWithoutMemsetsOrWithOnesOutside) {
  EXPECT_EQ(plan_stagger(12, kMiB, {}, kBudget).why, "no memsets in the workspace");
  EXPECT_EQ(plan_stagger(12, kMiB, {{kMiB - 4, kMiB + 4}}, kBudget).order, StaggerOrder::kKeep);
  EXPECT_EQ(plan_stagger(12, kMiB, {{8, 8}}, kBudget).order, StaggerOrder::kKeep);
  EXPECT_EQ(plan_stagger(12, kMiB, {}, kBudget).describe(), "kept (no memsets in the workspace)");
}

TEST(MemsetStagger, KeptCallsShareOneWorkspaceAndAreNotExclusive) {
  StaggeredCalls c;
  c.workspace = 4096;
  c.memsets = {{0, 64}};
  ASSERT_TRUE(place_in_region(c, 3, 8192));
  EXPECT_EQ(c.base, 0u);
  EXPECT_EQ(place_apart(c, 4096, 8192), 0u);  // today's place for the other buffer
  std::vector<ByteSpan> workspaces;
  std::vector<std::vector<ByteSpan>> memsets;
  for (int j = 0; j < 3; ++j) {
    workspaces.push_back(c.workspace_of(j, 3));
    memsets.push_back(c.memsets_of(j, 3));
  }
  EXPECT_FALSE(memsets_exclusive(workspaces, memsets, {}));
  // One call alone is exclusive, unless the other buffer covers its memsets.
  EXPECT_TRUE(memsets_exclusive({workspaces[0]}, {memsets[0]}, {}));
  EXPECT_FALSE(memsets_exclusive({workspaces[0]}, {memsets[0]}, {{32, 33}}));
  EXPECT_TRUE(memsets_exclusive({workspaces[0]}, {memsets[0]}, {{64, 128}}));
}

TEST(MemsetStagger, DoesNotFitInASmallRegion) {
  StaggeredCalls c;
  c.workspace = 4096;
  c.memsets = {{0, 64}};
  c.stagger = plan_stagger(12, 4096, c.memsets, kBudget);
  EXPECT_FALSE(place_in_region(c, 12, 4096 + 10 * 256));
  EXPECT_TRUE(place_in_region(c, 12, 4096 + 11 * 256));
}

TEST(MemsetStagger, RandomLayoutsAreExclusive) {
  std::mt19937_64 rng(12);
  int staggered = 0;
  for (int round = 0; round < 300; ++round) {
    const int calls = 1 + int(rng() % 12);
    const size_t workspace = 64 + rng() % (3 * kMiB);
    const size_t other = rng() % (4 * kMiB);
    std::vector<ByteSpan> memsets;
    const int n = 1 + int(rng() % 3);
    const bool near_end = rng() % 2 == 1;
    for (int k = 0; k < n; ++k) {
      const size_t bytes = 1 + rng() % std::min(workspace, size_t(4096));
      const size_t room = std::min(workspace - bytes, size_t(65536));
      const size_t at = rng() % (room + 1);
      const size_t begin = near_end ? workspace - bytes - at : at;
      memsets.push_back({begin, begin + bytes});
    }
    std::sort(memsets.begin(), memsets.end(),
              [](const ByteSpan& a, const ByteSpan& b) { return a.begin < b.begin; });
    if (plan_stagger(calls, workspace, memsets, kBudget).order == StaggerOrder::kKeep) continue;
    ++staggered;
    expect_exclusive(calls, workspace, memsets, other);
  }
  EXPECT_GT(staggered, 200);
}

}  // namespace
}  // namespace railyard::cuda
