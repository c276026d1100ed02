// The cuBLASLt pin table's lookup and matching (runtime/cuda/gemm_pins.hpp): no GPU needed.
#include "gemm_pins.hpp"

#include <gtest/gtest.h>

namespace railyard::cuda {
namespace {

// The fc2 backward-input DGELU product of GPT-2 124M at B=16, T=1024 on sm_90, cuBLASLt 13.1.0.
GemmPinKey fc2_dgelu() {
  GemmPinKey k;
  k.sm = 90;
  k.cublaslt_version = 130100;
  k.m = 3072, k.n = 16384, k.k = 768;
  k.epilogue = CUBLASLT_EPILOGUE_DGELU;
  return k;
}

GemmAlgoConfig config(int64_t algo, int64_t tile, int64_t cluster) {
  GemmAlgoConfig c;
  c.algo_id = algo, c.tile_id = tile, c.stages_id = 35, c.splitk = 1;
  c.reduction = CUBLASLT_REDUCTION_SCHEME_NONE, c.swizzle = 0, c.custom_option = 0;
  c.inner_shape_id = 0, c.cluster_shape_id = cluster;
  return c;
}

TEST(GemmPins, TableNamesTheKnownFc2DgeluPin) {
  const auto pin = pinned_algo(fc2_dgelu());
  ASSERT_TRUE(pin.has_value());
  EXPECT_EQ(*pin, config(39, 20, 5));
  EXPECT_EQ(to_string(*pin),
            "algo 39 tile 20 stages 35 splitK 1 reduction none swizzle 0 custom 0 inner 0 "
            "cluster 5");
}

TEST(GemmPins, EveryKeyFieldMustMatch) {
  std::vector<GemmPinKey> others(11, fc2_dgelu());
  others[0].sm = 100;
  others[1].cublaslt_version = 130200;
  others[2].trans_a = true;
  others[3].trans_b = true;
  others[4].m = 768;
  others[5].n = 8192;
  others[6].k = 3072;
  others[7].d_type = CUDA_R_32F;
  others[8].epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  others[9].beta_nonzero = true;
  others[10].batch = 2;
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_FALSE(pinned_algo(others[i]).has_value()) << "key variant " << i;
  }
}

TEST(GemmPins, LooksUpTheGivenTable) {
  GemmPinKey k = fc2_dgelu();
  k.m = 768;
  const std::vector<GemmPin> table = {{fc2_dgelu(), config(1, 2, 3)}, {k, config(4, 5, 6)}};
  EXPECT_EQ(pinned_algo(k, table), config(4, 5, 6));
  EXPECT_EQ(pinned_algo(fc2_dgelu(), table), config(1, 2, 3));
  EXPECT_FALSE(pinned_algo(fc2_dgelu(), {}).has_value());
}

TEST(GemmPins, FindsOnlyAnExactlyMatchingCandidate) {
  const GemmAlgoConfig pin = config(39, 20, 5);
  GemmAlgoConfig near = pin;
  near.swizzle = 1;  // one field off is another algorithm
  EXPECT_EQ(find_pinned({config(39, 20, 0), near, pin, pin}, pin), std::optional<size_t>(2));
  EXPECT_FALSE(find_pinned({config(39, 20, 0), near}, pin).has_value());
  EXPECT_FALSE(find_pinned({}, pin).has_value());
}

}  // namespace
}  // namespace railyard::cuda
