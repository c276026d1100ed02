// The GEMM survey's enumerated configurations (runtime/cuda/gemm_config_space.hpp): order, bound,
// no repeats, fixed-order split-K only. No GPU needed.
#include "gemm_config_space.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace railyard::cuda {
namespace {

GemmAlgoConfig seed(int64_t algo, int64_t tile, int64_t stages) {
  GemmAlgoConfig c;
  c.algo_id = algo, c.tile_id = tile, c.stages_id = stages, c.splitk = 1;
  c.reduction = CUBLASLT_REDUCTION_SCHEME_NONE, c.swizzle = 0, c.custom_option = 0;
  c.inner_shape_id = 0, c.cluster_shape_id = 0;
  return c;
}

GemmAlgoCaps caps(int64_t algo, std::vector<int64_t> tiles, std::vector<int64_t> stages) {
  GemmAlgoCaps c;
  c.algo_id = algo, c.tiles = std::move(tiles), c.stages = std::move(stages);
  c.splitk = true, c.swizzle = true, c.custom_option_max = 2;
  c.reduction_mask = CUBLASLT_REDUCTION_SCHEME_INPLACE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                     CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  return c;
}

size_t count_if(const std::vector<GemmAlgoConfig>& v, bool (*f)(const GemmAlgoConfig&)) {
  return static_cast<size_t>(std::count_if(v.begin(), v.end(), f));
}

TEST(GemmConfigSpace, FixedOrderOnlyWithoutSplitOrWithASeparateReduction) {
  GemmAlgoConfig c = seed(66, 20, 35);
  EXPECT_TRUE(fixed_order(c));
  c.splitk = 4;
  for (auto [scheme, fixed] : {std::pair{CUBLASLT_REDUCTION_SCHEME_INPLACE, false},
                               {CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, true},
                               {CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE, true},
                               {CUBLASLT_REDUCTION_SCHEME_NONE, false}}) {
    c.reduction = scheme;
    EXPECT_EQ(fixed_order(c), fixed) << reduction_name(scheme);
  }
}

TEST(GemmConfigSpace, SeedsComeFirstInTheirOrderThenTheirNeighbours) {
  const std::vector<GemmAlgoConfig> seeds = {seed(66, 20, 35), seed(66, 29, 35), seed(39, 20, 35)};
  const auto space = config_space(seeds, {caps(66, {20, 29, 201}, {35, 36})}, 1000);
  ASSERT_GE(space.size(), 4u);
  EXPECT_EQ(std::vector<GemmAlgoConfig>(space.begin(), space.begin() + 3), seeds);
  GemmAlgoConfig tile201 = seeds[0];
  tile201.tile_id = 201;
  EXPECT_EQ(space[3], tile201);  // the first seed's first new tile
  // Algorithm 39 has no caps: no neighbour of it is listed.
  EXPECT_EQ(std::count_if(space.begin(), space.end(),
                          [](const GemmAlgoConfig& c) { return c.algo_id == 39; }),
            1);
}

TEST(GemmConfigSpace, NeverListsARepeatNorAnInPlaceReduction) {
  GemmAlgoConfig inplace = seed(66, 20, 35);
  inplace.splitk = 2, inplace.reduction = CUBLASLT_REDUCTION_SCHEME_INPLACE;
  const auto space =
      config_space({seed(66, 20, 35), seed(66, 20, 35), inplace}, {caps(66, {20, 29}, {35})}, 1000);
  EXPECT_EQ(count_if(space, [](const GemmAlgoConfig& c) { return !fixed_order(c); }), 0u);
  for (size_t i = 0; i < space.size(); ++i) {
    for (size_t j = i + 1; j < space.size(); ++j) EXPECT_NE(space[i], space[j]) << i << " " << j;
  }
  // Split-K 2..16 (7 values) with both fixed-order reductions.
  EXPECT_EQ(count_if(space, [](const GemmAlgoConfig& c) { return c.splitk > 1; }), 14u);
}

TEST(GemmConfigSpace, CoversEachFieldOfTheSeedsAlgorithm) {
  const auto space = config_space({seed(66, 20, 35)}, {caps(66, {20, 29}, {35, 36})}, 1000);
  auto has = [&](auto pred) { return std::any_of(space.begin(), space.end(), pred); };
  EXPECT_TRUE(has([](const GemmAlgoConfig& c) { return c.swizzle == 1; }));
  EXPECT_TRUE(has([](const GemmAlgoConfig& c) { return c.custom_option == 2; }));
  EXPECT_FALSE(has([](const GemmAlgoConfig& c) { return c.custom_option == 3; }));
  EXPECT_TRUE(has(
      [](const GemmAlgoConfig& c) { return c.cluster_shape_id == CUBLASLT_CLUSTER_SHAPE_2x1x1; }));
  EXPECT_TRUE(has([](const GemmAlgoConfig& c) { return c.tile_id == 29 && c.stages_id == 36; }));
  EXPECT_TRUE(has([](const GemmAlgoConfig& c) {
    return c.splitk == 16 && c.reduction == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  }));
}

TEST(GemmConfigSpace, NoSplitOrClusterWhereTheAlgorithmOrGpuHasNone) {
  GemmAlgoCaps c = caps(66, {20}, {35});
  c.splitk = false;
  GemmAlgoConfig s = seed(66, 20, 35);
  s.cluster_shape_id = -1;  // before sm_90 this cuBLASLt cannot say
  const auto space = config_space({s}, {c}, 1000);
  EXPECT_EQ(count_if(space, [](const GemmAlgoConfig& x) { return x.splitk != 1; }), 0u);
  EXPECT_EQ(count_if(space, [](const GemmAlgoConfig& x) { return x.cluster_shape_id != -1; }), 0u);
}

TEST(GemmConfigSpace, UnseededAlgorithmsGetEveryTileAndStagesLast) {
  const auto space =
      config_space({seed(66, 20, 35)}, {caps(66, {20}, {35}), caps(71, {1, 2}, {7, 8, 9})}, 1000);
  std::vector<GemmAlgoConfig> of71;
  for (const auto& c : space) {
    if (c.algo_id == 71) of71.push_back(c);
  }
  ASSERT_EQ(of71.size(), 6u);
  EXPECT_EQ(space.back().algo_id, 71);
  EXPECT_EQ(of71.front().tile_id, 1);
  EXPECT_EQ(of71.front().stages_id, 7);
  EXPECT_EQ(of71.front().splitk, 1);
  // An algorithm that lists no tiles or stages is tried once with "undefined".
  const auto bare = config_space({}, {caps(5, {}, {})}, 1000);
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0].tile_id, 0);
  EXPECT_EQ(bare[0].stages_id, 0);
}

TEST(GemmConfigSpace, StopsAtTheLimit) {
  const std::vector<GemmAlgoConfig> seeds = {seed(66, 20, 35), seed(66, 29, 35)};
  const auto all = config_space(seeds, {caps(66, {20, 29, 201}, {35, 36})}, 100000);
  ASSERT_GT(all.size(), 10u);
  const auto some = config_space(seeds, {caps(66, {20, 29, 201}, {35, 36})}, 10);
  EXPECT_EQ(some, std::vector<GemmAlgoConfig>(all.begin(), all.begin() + 10));
  EXPECT_TRUE(config_space(seeds, {}, 0).empty());
}

}  // namespace
}  // namespace railyard::cuda
