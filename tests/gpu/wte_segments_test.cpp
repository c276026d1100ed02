// The segmented wte backward's plan (wte_segments.hpp): its launch shapes, the scratch it needs,
// and the combine's parts (contiguous, in order, covering every partial once).
#include <gtest/gtest.h>

#include "embedding_kernels.hpp"
#include "wte_segments.hpp"

namespace railyard::cuda {
namespace {

TEST(WteSegments, ShapesAtGpt2) {
  // bf16 rows of 768: 96 packs, one pass of 96 threads an entry, 768 a block.
  const SplitShape e = split_items(768 / 8, kWteSegmentThreads / kWteSegmentRows);
  EXPECT_EQ(e.threads, 96);
  EXPECT_EQ(e.passes, 1);
  EXPECT_EQ(kWteSegmentRows * e.threads, kWteSegmentThreads);
  // fp32 rows: 192 packs in two passes; the combine's 192 float4 columns in one.
  EXPECT_EQ(split_items(192, 96).passes, 2);
  EXPECT_EQ(split_items(192, kCombineColumns).threads, 192);
  EXPECT_EQ(wte_segments(16384), 2048);
  EXPECT_EQ(wte_segments(111), 14);  // a partial last segment
  // Two rows a segment: 12 MiB at GPT-2's batch, under the LM head's logits (553 MB).
  EXPECT_EQ(embedding_backward_scratch_bytes(16, 1024, 768), size_t(2) * 2048 * 768 * 4);
}

TEST(WteSegments, SplitCoversEveryItemWithinTheBound) {
  for (int most : {1, 7, 96, 192}) {
    for (int items = 1; items <= 700; ++items) {
      const SplitShape s = split_items(items, most);
      ASSERT_LE(s.threads, most) << items << " " << most;
      ASSERT_GE(s.threads * s.passes, items) << items << " " << most;
      ASSERT_LT(s.threads * (s.passes - 1), items) << items << " " << most;  // no idle pass
    }
  }
}

TEST(WteSegments, CombinePartsAreContiguousAndInOrder) {
  for (int count = 2; count <= 3000; ++count) {
    ASSERT_EQ(combine_part_begin(0, count), 0);
    ASSERT_EQ(combine_part_begin(kCombineGroups, count), count);
    for (int j = 0; j < kCombineGroups; ++j) {
      ASSERT_LE(combine_part_begin(j, count), combine_part_begin(j + 1, count)) << count;
    }
  }
}

}  // namespace
}  // namespace railyard::cuda
