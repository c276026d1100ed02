// The LM head's chunk plan (runtime/cuda/head_chunks.hpp): no GPU needed.
#include "head_chunks.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace railyard::cuda {
namespace {

std::vector<int64_t> chunk_rows(const HeadChunks& h) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < h.count; ++i) rows.push_back(head_chunk_rows(h, i));
  return rows;
}

TEST(HeadChunks, Gpt2AtBatch16Seq1024RunsInThreeChunks) {
  const HeadChunks bf16 = head_chunks(16 * 1024, 50304, 2);
  EXPECT_EQ(chunk_rows(bf16), (std::vector<int64_t>{5504, 5504, 5376}));
  // The logits buffer (5504 rows) outgrows the 478 MB region it shares by 76 MB only.
  EXPECT_EQ(bf16.rows * 50304 * 2, 553746432);
  EXPECT_EQ(chunk_rows(head_chunks(16 * 1024, 50304, 4)),
            (std::vector<int64_t>{2816, 2816, 2816, 2816, 2816, 2304}));
}

TEST(HeadChunks, TheA_BBudgetGivesFourChunksOf4096) {
  const size_t four = size_t(4096) * 50304 * 2;
  EXPECT_EQ(chunk_rows(head_chunks(16 * 1024, 50304, 2, four)),
            (std::vector<int64_t>{4096, 4096, 4096, 4096}));
}

// Every plan: the fewest chunks within the budget, aligned rows, the last one short, as equal as
// the alignment allows.
TEST(HeadChunks, FewestAlignedChunksWithinTheBudget) {
  const size_t budget = size_t(1000) * 128 * 8;  // 1000 aligned rows of 128 x 8 B
  for (int64_t n = 1; n <= 9000; n += 37) {
    const HeadChunks h = head_chunks(n, 128, 8, budget);
    ASSERT_GE(h.count, 1) << n;
    EXPECT_LE(h.rows * 128 * 8, int64_t(budget)) << n;
    EXPECT_EQ((h.count - 1) * h.rows + h.last, n) << n;
    EXPECT_GE(h.last, 1) << n;
    EXPECT_LE(h.last, h.rows) << n;
    if (h.count == 1) {
      EXPECT_EQ(h.rows, n);
      continue;
    }
    EXPECT_EQ(h.rows % kHeadRowsAlign, 0) << n;
    EXPECT_EQ(h.count, (n + 895) / 896) << n;  // 896: the most aligned rows within budget
    EXPECT_LT(h.rows - h.last, h.count * kHeadRowsAlign) << n;
  }
}

TEST(HeadChunks, SmallBatchesRunInOneChunkOfTheirRows) {
  for (int64_t n : {1, 8, 127, 1024, 5504}) {
    const HeadChunks h = head_chunks(n, 50304, 2);
    EXPECT_EQ(h.count, 1) << n;
    EXPECT_EQ(h.rows, n) << n;
    EXPECT_EQ(h.last, n) << n;
  }
}

TEST(HeadChunks, RefusesWhatCannotBeChunked) {
  EXPECT_THROW(head_chunks(0, 50304, 2), std::invalid_argument);
  EXPECT_THROW(head_chunks(16, 0, 2), std::invalid_argument);
  // Fewer than 128 rows in the budget.
  EXPECT_THROW(head_chunks(1024, 50304, 2, size_t(127) * 50304 * 2), std::invalid_argument);
  // 2^31 logits or more in one chunk (a budget that large would allow it).
  EXPECT_THROW(head_chunks(1 << 16, 1 << 16, 2, size_t(1) << 40), std::invalid_argument);
  EXPECT_NO_THROW(head_chunks(1 << 14, 1 << 16, 2, size_t(1) << 40));
}

}  // namespace
}  // namespace railyard::cuda
