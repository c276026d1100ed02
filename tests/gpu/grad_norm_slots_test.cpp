// The gradient norm's fixed partition (grad_norm_slices.hpp): how many per-block slots each
// bucket fills depends on its size alone, the tail bucket (on the critical path) may fill the
// GPU, the others run on few blocks; the engine plans exactly that many slots.
#include <gtest/gtest.h>

#include <vector>

#include "grad_norm_kernels.hpp"
#include "grad_norm_slices.hpp"

namespace railyard::cuda {
namespace {

TEST(GradNormSlots, OneSlotPerBlockOfFourFloatsPerThreadUpToTheCap) {
  EXPECT_EQ(grad_sumsq_slots(0, 264), 0u);
  EXPECT_EQ(grad_sumsq_slots(1, 264), 1u);
  EXPECT_EQ(grad_sumsq_slots(2048, 264), 1u);  // 512 threads x 4 floats
  EXPECT_EQ(grad_sumsq_slots(2049, 264), 2u);
  EXPECT_EQ(grad_sumsq_slots(size_t(7) << 20, 264), 264u);
  EXPECT_EQ(grad_sumsq_slots(size_t(7) << 20, grad_sumsq_full_blocks()), grad_sumsq_full_blocks());
}

TEST(GradNormSlots, TheTailFillsTheGpuTheOthersRunOnFewBlocks) {
  // GPT-2 small's buckets: 12 layers, the embeddings (the tail), the final LayerNorm.
  std::vector<GradBucket> buckets;
  size_t at = 39383040;  // wte + wpe
  for (int l = 0; l < 12; ++l, at += 7087872) buckets.push_back({at, at + 7087872});
  buckets.push_back({0, 39383040});
  buckets.push_back({at, at + 1536});
  EXPECT_EQ(GradNormSlices::slots_needed(buckets, 12), 12 * 528 + grad_sumsq_full_blocks() + 1);
  // Another tail, another partition: the count follows the bucket named as tail (here the
  // final LayerNorm's, one block whatever the cap).
  EXPECT_EQ(GradNormSlices::slots_needed(buckets, 13), 13 * 528 + 1);
}

}  // namespace
}  // namespace railyard::cuda
