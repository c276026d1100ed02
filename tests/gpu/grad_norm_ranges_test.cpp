// The host side of the gradient norm's pass over part of the gradients
// (runtime/cuda/grad_norm_kernels.hpp): the table of ranges the pass reads when the split kernels
// summed the rest, and the slot count of its fixed partition. Checked without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "grad_norm_kernels.hpp"

namespace railyard::cuda {
namespace {

TEST(SumsqRangeTable, KeepsTheNonEmptyRangesInOrderInPacksWithTheirFirstTiles) {
  const std::vector<std::pair<size_t, size_t>> parts = {{0, 4}, {8, 8}, {16, 24}, {24, 24}};
  const auto t = sumsq_range_table(parts);
  ASSERT_EQ(t.size(), 3u);  // two ranges and the sentinel
  EXPECT_EQ(t[0].begin4, 0u);
  EXPECT_EQ(t[0].end4, 1u);
  EXPECT_EQ(t[0].first_tile, 0u);
  EXPECT_EQ(t[1].begin4, 4u);
  EXPECT_EQ(t[1].end4, 6u);
  EXPECT_EQ(t[1].first_tile, 1u);  // a short range is one tile
  EXPECT_EQ(t[2].first_tile, 2u);  // the sentinel: the number of tiles
}

TEST(SumsqRangeTable, ALongRangeTakesSeveralTilesAndNoneIsEmpty) {
  const size_t n = size_t(1) << 22;
  const auto one = sumsq_range_table({{0, n}});
  const uint64_t tiles = one.back().first_tile;
  EXPECT_GT(tiles, 1u);
  EXPECT_LE(tiles, n / 4);  // a tile holds at least one pack
  // One element more than the tiles hold (one pack) needs exactly one tile more.
  const uint64_t per_tile = (n / 4) / tiles;
  ASSERT_EQ(per_tile * tiles, n / 4);
  EXPECT_EQ(sumsq_range_table({{0, n + 4}}).back().first_tile, tiles + 1);
  // Tiles never span two ranges: two halves take as many tiles as the whole, plus one where the
  // cut falls inside a tile.
  const auto halves = sumsq_range_table({{0, n / 2 + 4}, {n / 2 + 4, n}});
  EXPECT_EQ(halves[1].first_tile, (n / 8 + 1 + per_tile - 1) / per_tile);
  EXPECT_EQ(halves.back().first_tile, tiles + 1);
}

TEST(SumsqRangeTable, RefusesARangeOffSixteenBytePacks) {
  EXPECT_THROW(sumsq_range_table({{2, 8}}), std::invalid_argument);
  EXPECT_THROW(sumsq_range_table({{0, 6}}), std::invalid_argument);
  EXPECT_THROW(sumsq_range_table({{8, 4}}), std::invalid_argument);
  try {
    sumsq_range_table({{0, 4}, {12, 18}});
    FAIL() << "a range off 16-byte packs was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[12, 18)"), std::string::npos) << e.what();
  }
}

TEST(SumsqRangeSlots, TileBlocksAreCappedAndTheDoneSlotsComeInChunks) {
  EXPECT_EQ(grad_sumsq_ranges_slots(0, 0), 0u);
  EXPECT_EQ(grad_sumsq_ranges_slots(1, 0), 1u);
  EXPECT_EQ(grad_sumsq_ranges_slots(0, 1), 1u);
  // Many tiles share a fixed number of blocks: the partition does not grow with the tiles.
  const size_t capped = grad_sumsq_ranges_slots(size_t(1) << 30, 0);
  EXPECT_EQ(grad_sumsq_ranges_slots(size_t(1) << 31, 0), capped);
  EXPECT_LT(capped, size_t(1) << 20);
  // The done slots: one more slot only once a chunk is full.
  size_t chunk = 1;
  while (grad_sumsq_ranges_slots(0, chunk + 1) == 1) ++chunk;
  EXPECT_GT(chunk, 1u);
  EXPECT_EQ(grad_sumsq_ranges_slots(0, 2 * chunk), 2u);
  EXPECT_EQ(grad_sumsq_ranges_slots(3, 2 * chunk + 1), 3u + 3u);
}

}  // namespace
}  // namespace railyard::cuda
