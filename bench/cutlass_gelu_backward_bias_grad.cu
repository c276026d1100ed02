// The backward into the MLP's GELU seen transposed (features as M), with the fc bias gradient
// fused: CUTLASS's per-row reduction of the epilogue, which keeps a partial per tile and lets the
// last CTA of a row of tiles add them in tile order (cutlass_gelu_gemms.hpp), so the sum has
// the same bits every launch. Compared with cuBLASLt's DGELU followed by runtime/cuda's bias_grad.
#include "cutlass_sm90_launch.cuh"

namespace railyard::bench {

std::vector<GeluGemmVariant> cutlass_backward_bias_grad_variants() {
  using namespace cute;
  using namespace sm90;
  return {
      variant<TransposedBackwardGemm<Shape<_128, _256, _64>, Shape<_1, _2, _1>, Cooperative,
                                     BackwardGeluBiasGrad>>(
          "T 128x256x64 c1x2 coop", GeluProduct::kBackwardBiasGrad, FillBackwardBiasGrad{}),
      variant<TransposedBackwardGemm<Shape<_128, _128, _64>, Shape<_2, _1, _1>, Pingpong,
                                     BackwardGeluBiasGrad>>(
          "T 128x128x64 c2x1 pingpong", GeluProduct::kBackwardBiasGrad, FillBackwardBiasGrad{}),
  };
}

}  // namespace railyard::bench
