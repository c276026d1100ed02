// ParamLayout: offsets, alignment, lookups and its errors.

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "railyard/gpt_config.hpp"
#include "railyard/param_layout.hpp"

namespace railyard {
namespace {

TEST(ParamLayout, OffsetsAreAlignedAndContiguous) {
  ParamLayout layout;
  const TensorSpec& a = layout.add("a", {3, 5}, true);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.numel, 15u);
  layout.add("b", {7}, false);
  layout.add("c", {2, 2, 2}, true);
  EXPECT_EQ(layout.at("b").offset, 16u);
  EXPECT_EQ(layout.at("c").offset, 24u);
  EXPECT_EQ(layout.total(), 32u);
  EXPECT_FALSE(layout.at("b").decay);
  EXPECT_TRUE(layout.at("c").decay);
  EXPECT_EQ(layout.tensors().size(), 3u);
}

TEST(ParamLayout, LookupAndErrors) {
  ParamLayout layout;
  layout.add("w", {4, 4}, true);
  EXPECT_NE(layout.find("w"), nullptr);
  EXPECT_EQ(layout.find("x"), nullptr);
  EXPECT_THROW(layout.add("w", {1}, true), std::invalid_argument);
  EXPECT_THROW(layout.add("z", {3, 0}, true), std::invalid_argument);
  EXPECT_THROW(layout.add("z", {-1}, true), std::invalid_argument);
  try {
    layout.at("missing");
    FAIL() << "at() must throw for an absent tensor";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos);
  }
  EXPECT_EQ(layout.total(), 16u);  // failed adds leave the layout unchanged
}

TEST(ParamLayout, ManyTensorsAreAddedInLinearTime) {
  // 240k tensors: a name lookup by scan in add() made this take minutes.
  GptConfig cfg;
  cfg.vocab = cfg.padded_vocab = 8;
  cfg.max_seq = 4;
  cfg.layers = 20000;
  cfg.heads = 1;
  cfg.dim = 8;
  const auto t0 = std::chrono::steady_clock::now();
  const ParamLayout layout = gpt_param_layout(cfg);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(layout.tensors().size(), 2u + 12u * 20000u + 2u);
  EXPECT_EQ(layout.at("h.19999.mlp.proj.bias").numel, 8u);
  EXPECT_LT(secs, 10.0);
}

TEST(ParamLayout, AnOverflowingShapeIsRefused) {
  ParamLayout layout;
  EXPECT_THROW(layout.add("huge", {int64_t{1} << 40, int64_t{1} << 40}, true),
               std::invalid_argument);
}

}  // namespace
}  // namespace railyard
