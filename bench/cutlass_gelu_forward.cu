// The MLP's fc forward as CUTLASS Hopper GEMMs with bias, GELU and the value before GELU fused in
// the epilogue (cutlass_gelu_gemms.hpp): the configurations the bench compares with cuBLASLt's
// GELU_AUX_BIAS. Each configuration is one kernel instantiation: a few minutes of nvcc.
#include "cutlass_sm90_launch.cuh"

namespace railyard::bench {

std::vector<GeluGemmVariant> cutlass_forward_variants() {
  using namespace cute;
  using namespace sm90;
  return {
      variant<ForwardGemm<Shape<_256, _128, _64>, Shape<_2, _1, _1>, Cooperative, ForwardGelu>>(
          "256x128x64 c2x1 coop", GeluProduct::kForward, FillForward{}),
      variant<ForwardGemm<Shape<_128, _256, _64>, Shape<_1, _2, _1>, Cooperative, ForwardGelu>>(
          "128x256x64 c1x2 coop", GeluProduct::kForward, FillForward{}),
      variant<GeluForwardPingpong>("128x128x64 c1x2 pingpong", GeluProduct::kForward,
                                   FillForward{}),
  };
}

}  // namespace railyard::bench
