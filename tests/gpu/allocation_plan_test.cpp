// The CUDA engine's allocation plan (host code only: runs without a GPU).

#include "allocation_plan.hpp"

#include <gtest/gtest.h>

using railyard::cuda::AllocationPlan;

TEST(AllocationPlan, PlacesBuffersOneAfterAnotherAligned) {
  AllocationPlan plan;
  EXPECT_EQ(plan.add("a", 10), 0u);
  EXPECT_EQ(plan.add("b", 300), AllocationPlan::kAlignBytes);
  EXPECT_EQ(plan.total(), 3 * AllocationPlan::kAlignBytes);
}

TEST(AllocationPlan, OverlaidGroupsShareOneRegionOfTheLargestGroup) {
  AllocationPlan plan;
  plan.add("before", 100);
  const size_t base = plan.total();
  auto at = plan.add_overlaid("shared", {{1000}, {256, 10, 600}});
  ASSERT_EQ(at.size(), 2u);
  EXPECT_EQ(at[0], (std::vector<size_t>{base}));
  // Within a group, buffers do not overlap; the groups start at the same place.
  EXPECT_EQ(at[1], (std::vector<size_t>{base, base + 256, base + 512}));
  EXPECT_EQ(plan.total(), base + 1280);  // 256 + 256 + 768 > 1024
  EXPECT_EQ(plan.add("after", 1), base + 1280);
  EXPECT_NE(plan.summary().find("shared"), std::string::npos);
}

TEST(AllocationPlan, AlignedRoundsUpToTheBoundary) {
  EXPECT_EQ(AllocationPlan::aligned(0), 0u);
  EXPECT_EQ(AllocationPlan::aligned(1), AllocationPlan::kAlignBytes);
  EXPECT_EQ(AllocationPlan::aligned(AllocationPlan::kAlignBytes), AllocationPlan::kAlignBytes);
  EXPECT_EQ(AllocationPlan::aligned(AllocationPlan::kAlignBytes + 1),
            2 * AllocationPlan::kAlignBytes);
}
