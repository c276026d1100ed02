// The backward into the MLP's GELU (fc2's input gradient times GELU' of the forward's value
// before GELU, read as a second input in the epilogue) as CUTLASS Hopper GEMMs
// (cutlass_gelu_gemms.hpp): the configurations the bench compares with cuBLASLt's DGELU.
#include "cutlass_sm90_launch.cuh"

namespace railyard::bench {

std::vector<GeluGemmVariant> cutlass_backward_variants() {
  using namespace cute;
  using namespace sm90;
  return {
      variant<BackwardGemm<Shape<_256, _128, _64>, Shape<_2, _1, _1>, Cooperative, BackwardGelu>>(
          "256x128x64 c2x1 coop", GeluProduct::kBackward, FillBackward{}),
      variant<BackwardGemm<Shape<_128, _256, _64>, Shape<_1, _2, _1>, Cooperative, BackwardGelu>>(
          "128x256x64 c1x2 coop", GeluProduct::kBackward, FillBackward{}),
      variant<BackwardGemm<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Pingpong, BackwardGelu>>(
          "128x128x64 c1x2 pingpong", GeluProduct::kBackward, FillBackward{}),
  };
}

}  // namespace railyard::bench
