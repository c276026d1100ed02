// The cuDNN attention's plan pins (host code only: runs without a GPU or cuDNN library).

#include "attention_plan_pin.hpp"

#include <gtest/gtest.h>

using railyard::cuda::AttentionShape;
using railyard::cuda::pinned_sdpa_plan;
using railyard::cuda::SdpaGraph;
using railyard::cuda::SdpaPlanKey;

namespace {

// GPT-2 124M's attention at micro-batch 16, seq 1024, on an H200 with cuDNN 9.14.0.
SdpaPlanKey h200_gpt2() {
  return SdpaPlanKey{90, 91400, AttentionShape{16, 1024, 12, 64}, SdpaGraph::kForward};
}

}  // namespace

TEST(AttentionPlanPin, MeasuredKeyNamesThePlan) {
  EXPECT_EQ(pinned_sdpa_plan(h200_gpt2()), "eng2_k24=7");
}

TEST(AttentionPlanPin, CudnnMatchesByMajorMinorOnly) {
  SdpaPlanKey k = h200_gpt2();
  k.cudnn_version = 91403;  // a patch release keeps the plan list
  EXPECT_EQ(pinned_sdpa_plan(k), "eng2_k24=7");
  k.cudnn_version = 91900;  // 9.19's heuristic already ranks this plan first
  EXPECT_EQ(pinned_sdpa_plan(k), "");
  k.cudnn_version = 91300;
  EXPECT_EQ(pinned_sdpa_plan(k), "");
  k.cudnn_version = 101400;
  EXPECT_EQ(pinned_sdpa_plan(k), "");
}

TEST(AttentionPlanPin, EveryOtherFieldMustMatch) {
  auto changed = [](auto edit) {
    SdpaPlanKey k = h200_gpt2();
    edit(k);
    return pinned_sdpa_plan(k);
  };
  EXPECT_EQ(changed([](SdpaPlanKey& k) { k.sm = 100; }), "");
  EXPECT_EQ(changed([](SdpaPlanKey& k) { k.sm = 89; }), "");
  EXPECT_EQ(changed([](SdpaPlanKey& k) { k.graph = SdpaGraph::kBackward; }), "");
  // Same B * T, other B and T: not measured, so not pinned.
  EXPECT_EQ(changed([](SdpaPlanKey& k) { k.shape.B = 8, k.shape.T = 2048; }), "");
  EXPECT_EQ(changed([](SdpaPlanKey& k) { k.shape.B = 4; }), "");
  EXPECT_EQ(changed([](SdpaPlanKey& k) { k.shape.H = 6; }), "");
  EXPECT_EQ(changed([](SdpaPlanKey& k) { k.shape.hd = 128; }), "");
}
