// The AdamW decay mask packed to bits: the kernel reads bit i % 32 of word i / 32.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "adamw_kernels.hpp"

namespace railyard::cuda {
namespace {

TEST(DecayMask, PacksOneBitPerElementAcrossWordBoundaries) {
  std::vector<uint8_t> decay(70, 0);
  for (size_t i : {0, 31, 32, 33, 69}) decay[i] = 1;
  decay[40] = 7;  // any non-zero byte decays
  const std::vector<uint32_t> bits = pack_decay_mask(decay);
  ASSERT_EQ(bits.size(), decay_mask_words(70));
  ASSERT_EQ(bits.size(), 3u);
  for (size_t i = 0; i < decay.size(); ++i) {
    EXPECT_EQ((bits[i / 32] >> (i % 32)) & 1u, decay[i] != 0 ? 1u : 0u) << "element " << i;
  }
  EXPECT_EQ(bits[2] >> 6, 0u);  // nothing past the last element
}

TEST(DecayMask, EmptyMaskHasNoWords) {
  EXPECT_TRUE(pack_decay_mask({}).empty());
}

}  // namespace
}  // namespace railyard::cuda
