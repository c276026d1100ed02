#pragma once
// How railyard's CUTLASS products are assembled: one Hopper TMA warp-specialized GEMM per
// (operand layouts, tile, cluster, schedule, epilogue fusion), built by CUTLASS's
// CollectiveBuilders; bf16 operands, fp32 accumulation, M = tokens. Shared by the engine's fc
// forward (gelu_gemm_cutlass.cu) and bench/cutlass_gelu_bench, so that the kernel the bench
// measured is the type the engine runs. Include only from units compiled for sm_90a alone (wgmma
// and TMA exist only there) with NDEBUG (a device assert makes ptxas serialize the wgmma
// pipeline, warning C7510).

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/kernel_hardware_info.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace railyard::cuda::sm90 {

using Bf16 = cutlass::bfloat16_t;
constexpr int kAlign = 8;  // 16 bytes of bf16: TMA wants every row on 16 bytes

// The two schedules: two consumer warp groups sharing each tile (cooperative), or taking turns
// on alternate tiles so one's epilogue overlaps the other's math (ping-pong).
struct Cooperative {
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using Epilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
};
struct Pingpong {
  using Mainloop = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using Epilogue = cutlass::epilogue::TmaWarpSpecialized;
};

// Elements of a 16-byte TMA unit (a void C, absent, takes bf16's).
template <class E>
constexpr int align_of() {
  if constexpr (std::is_void_v<E>) {
    return kAlign;
  } else {
    return int(16 / sizeof(E));
  }
}

// CUTLASS's layout tags: A [M,K] RowMajor is K-major, ColumnMajor M-major; B [N,K] ColumnMajor is
// K-major (a Linear weight [N,K] row-major), RowMajor N-major ([K,N] row-major); D [M,N] as A.
// No C operand (ElementC void) unless a product adds one (the residual forwards: C bf16, laid out
// as D, read by the epilogue's TMA load). D is bf16 but for the fp32 weight gradients. The
// default persistent tile scheduler (no split-K, no stream-K): every output tile is one CTA's,
// summed in one order.
template <class LayoutA, class LayoutB, class LayoutD, class Tile, class Cluster, class Schedule,
          class Fusion, class ElementC = void, class ElementD = Bf16>
struct Gemm {
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, ElementC, LayoutD,
      align_of<ElementC>(), ElementD, LayoutD, align_of<ElementD>(), typename Schedule::Epilogue,
      Fusion>::CollectiveOp;
  // The mainloop takes the shared memory the epilogue leaves for as many stages as fit.
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, LayoutA, kAlign, Bf16, LayoutB,
      kAlign, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      typename Schedule::Mainloop>::CollectiveOp;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<
      cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue>>;
};

// The stride of a matrix whose modes 0 and 1 have `extent0` and `extent1` elements and whose
// lines along the contiguous mode (S's static _1) start `ld` elements apart; the third mode
// (batch) steps over the whole matrix.
template <class S>
S strided(int64_t extent0, int64_t extent1, int64_t ld) {
  S s{};
  if constexpr (cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value) {
    cute::get<1>(s) = ld;
    cute::get<2>(s) = ld * extent1;
  } else {
    cute::get<0>(s) = ld;
    cute::get<2>(s) = ld * extent0;
  }
  return s;
}

// The same for a packed matrix: lines as long as the contiguous mode's extent.
template <class S>
S packed_stride(int64_t extent0, int64_t extent1) {
  S s{};
  constexpr bool contiguous0 =
      cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value;
  return strided<S>(extent0, extent1, contiguous0 ? extent0 : extent1);
}

inline void check(cutlass::Status st, const std::string& name, const char* what) {
  if (st != cutlass::Status::kSuccess) {
    throw std::runtime_error(name + ": CUTLASS " + what + " failed: " + cutlassGetStatusString(st) +
                             " (shape or alignment this configuration cannot run)");
  }
}

// The fusions (GELU: GPT-2's tanh form; the forward's value before GELU stored as bf16).
using ForwardGelu = cutlass::epilogue::fusion::LinCombPerColBiasEltActAux<
    cutlass::layout::RowMajor, cutlass::epilogue::thread::GELU_taylor, Bf16, float, Bf16, Bf16>;
using BackwardGelu =
    cutlass::epilogue::fusion::LinCombDeEltAct<cutlass::layout::RowMajor,
                                               cutlass::epilogue::thread::dGELU, Bf16, float, Bf16>;
using ForwardBias = cutlass::epilogue::fusion::LinCombPerColBias<Bf16, float, Bf16>;
using Plain = cutlass::epilogue::fusion::LinearCombination<Bf16, float>;
using BackwardGeluBiasGrad = cutlass::epilogue::fusion::LinCombDeEltActDePerRowBias<
    cutlass::layout::ColumnMajor, cutlass::epilogue::thread::dGELU, Bf16, float, Bf16, float>;

// Forward products take a Linear weight [N,K]; backward ones a weight read as [K,N]; the
// transposed backward (bias gradient per row) the weight as A [M,K] M-major and D column-major.
template <class Tile, class Cluster, class Schedule, class Fusion>
using ForwardGemm =
    typename Gemm<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor,
                  cutlass::layout::RowMajor, Tile, Cluster, Schedule, Fusion>::Adapter;
template <class Tile, class Cluster, class Schedule, class Fusion>
using BackwardGemm =
    typename Gemm<cutlass::layout::RowMajor, cutlass::layout::RowMajor, cutlass::layout::RowMajor,
                  Tile, Cluster, Schedule, Fusion>::Adapter;
template <class Tile, class Cluster, class Schedule, class Fusion>
using TransposedBackwardGemm =
    typename Gemm<cutlass::layout::ColumnMajor, cutlass::layout::ColumnMajor,
                  cutlass::layout::ColumnMajor, Tile, Cluster, Schedule, Fusion>::Adapter;

// The residual forwards (attention projection, fc2): D = X W^T + bias + C with C the incoming
// residual stream (beta 1 in ForwardBias's arguments: beta C + (alpha acc + bias) in fp32,
// rounded once to bf16), C another buffer laid out as D.
template <class Tile, class Cluster, class Schedule>
using ResidualForwardGemm =
    typename Gemm<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor,
                  cutlass::layout::RowMajor, Tile, Cluster, Schedule, ForwardBias, Bf16>::Adapter;
using ResidualPingpong128x128 =
    ResidualForwardGemm<cute::Shape<cute::_128, cute::_128, cute::_64>,
                        cute::Shape<cute::_1, cute::_2, cute::_1>, Pingpong>;
using ResidualCooperative256x128 =
    ResidualForwardGemm<cute::Shape<cute::_256, cute::_128, cute::_64>,
                        cute::Shape<cute::_2, cute::_1, cute::_1>, Cooperative>;
using ResidualCooperative128x256 =
    ResidualForwardGemm<cute::Shape<cute::_128, cute::_256, cute::_64>,
                        cute::Shape<cute::_2, cute::_1, cute::_1>, Cooperative>;

// The LM head's weight gradient, dW[V,C] (+)= dlogits[N,V]^T X[N,C] in fp32 (the tied wte's
// gradient over the head's chunks of N positions): A = dlogits^T is M-major, B = X^T N-major, C
// and D fp32 row-major, D itself as C (beta 1) from the second chunk on.
using HeadWeightGradSum = cutlass::epilogue::fusion::LinearCombination<float, float, float, float>;
template <class Tile, class Cluster, class Schedule>
using HeadWeightGradGemm = typename Gemm<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor,
                                         cutlass::layout::RowMajor, Tile, Cluster, Schedule,
                                         HeadWeightGradSum, float, float>::Adapter;
using HeadWeightGradPingpong128x128 =
    HeadWeightGradGemm<cute::Shape<cute::_128, cute::_128, cute::_64>,
                       cute::Shape<cute::_1, cute::_2, cute::_1>, Pingpong>;
using HeadWeightGradCooperative256x128 =
    HeadWeightGradGemm<cute::Shape<cute::_256, cute::_128, cute::_64>,
                       cute::Shape<cute::_2, cute::_1, cute::_1>, Cooperative>;
using HeadWeightGradCooperative128x256 =
    HeadWeightGradGemm<cute::Shape<cute::_128, cute::_256, cute::_64>,
                       cute::Shape<cute::_2, cute::_1, cute::_1>, Cooperative>;

// The engine's fc forward (bench/NOTES.md, "CUTLASS fused GELU products (measured)": 137.6 us
// against cuBLASLt's 149.9 at 16384 x 3072 x 768 on an H200): 128x128x64 tiles, cluster 1x2,
// ping-pong, GELU + aux + bias in the epilogue.
using GeluForwardPingpong =
    ForwardGemm<cute::Shape<cute::_128, cute::_128, cute::_64>,
                cute::Shape<cute::_1, cute::_2, cute::_1>, Pingpong, ForwardGelu>;

}  // namespace railyard::cuda::sm90
