// The MLP's two GELU products without the GELU, as CUTLASS Hopper GEMMs (cutlass_gelu_gemms.hpp):
// the forward with only its bias and the backward alone, the floor the fused ones are measured
// against, in the configuration the fused ones start from.
#include <cutlass/version.h>

#include "cutlass_sm90_launch.cuh"

namespace railyard::bench {

std::vector<GeluGemmVariant> cutlass_plain_variants() {
  using namespace cute;
  using namespace sm90;
  return {
      variant<ForwardGemm<Shape<_256, _128, _64>, Shape<_2, _1, _1>, Cooperative, ForwardBias>>(
          "256x128x64 c2x1 coop", GeluProduct::kPlainForward, FillBias{}),
      variant<ForwardGemm<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Pingpong, ForwardBias>>(
          "128x128x64 c1x2 pingpong", GeluProduct::kPlainForward, FillBias{}),
      variant<BackwardGemm<Shape<_256, _128, _64>, Shape<_2, _1, _1>, Cooperative, Plain>>(
          "256x128x64 c2x1 coop", GeluProduct::kPlainBackward, FillNone{}),
      variant<BackwardGemm<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Pingpong, Plain>>(
          "128x128x64 c1x2 pingpong", GeluProduct::kPlainBackward, FillNone{}),
  };
}

std::string cutlass_version() {
  return std::to_string(CUTLASS_MAJOR) + "." + std::to_string(CUTLASS_MINOR) + "." +
         std::to_string(CUTLASS_PATCH);
}

}  // namespace railyard::bench
