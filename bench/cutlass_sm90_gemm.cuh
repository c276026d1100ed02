#pragma once
// How the bench's CUTLASS products (cutlass_gelu_gemms.hpp) are built and launched: one Hopper
// TMA warp-specialized GEMM per (B layout, tile, cluster, schedule, epilogue fusion), assembled by
// CUTLASS's CollectiveBuilders; bf16 operands, fp32 accumulation, row-major A and D, M = tokens.
// Included only by the cutlass_gelu_*.cu files, which are compiled for sm_90a alone.

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/activation.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/kernel_hardware_info.h>
#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "cutlass_gelu_gemms.hpp"
#include "device_buffer.hpp"

namespace railyard::bench::sm90 {

using Bf16 = cutlass::bfloat16_t;
constexpr int kAlign = 8;  // 16 bytes of bf16: every row the products touch starts on 16 bytes

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

// CUTLASS's layout tags: A [M,K] RowMajor is K-major, ColumnMajor M-major; B [N,K] ColumnMajor is
// K-major (a Linear weight [N,K] row-major), RowMajor N-major ([K,N] row-major); D [M,N] as A.
// No C operand (void): the products never read D back.
template <class LayoutA, class LayoutB, class LayoutD, class Tile, class Cluster, class Schedule,
          class Fusion>
struct Gemm {
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlign, Bf16,
      LayoutD, kAlign, typename Schedule::Epilogue, Fusion>::CollectiveOp;
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

// The stride of a packed matrix whose modes 0 and 1 have `extent0` and `extent1` elements: S's
// static mode (_1) is the contiguous one, the other steps over it, the third (batch) over all.
template <class S>
S packed_stride(int64_t extent0, int64_t extent1) {
  S s{};
  if constexpr (cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value)
    cute::get<1>(s) = extent0;
  else
    cute::get<0>(s) = extent1;
  cute::get<2>(s) = extent0 * extent1;
  return s;
}

inline void check(cutlass::Status st, const std::string& name, const char* what) {
  if (st != cutlass::Status::kSuccess) {
    throw std::runtime_error(name + ": CUTLASS " + what + " failed: " + cutlassGetStatusString(st) +
                             " (shape or alignment this configuration cannot run)");
  }
}

template <class G>
class Launch final : public GeluGemmLaunch {
 public:
  // `reset_each_run`: the workspace holds counters the kernel leaves non-zero (the bias
  // gradient's), so every run initializes it again (a memset on the stream, part of the time).
  Launch(std::string name, const typename G::Arguments& args, bool reset_each_run)
      : name_(std::move(name)), args_(args), reset_each_run_(reset_each_run) {
    check(gemm_.can_implement(args_), name_, "can_implement");
    workspace_ = cuda::DeviceBuffer(G::get_workspace_size(args_));
    check(gemm_.initialize(args_, workspace_.as<void>()), name_, "initialize");
  }

  void run(cudaStream_t stream) override {
    if (reset_each_run_) {
      check(gemm_.initialize(args_, workspace_.as<void>(), stream), name_, "initialize");
    }
    check(gemm_.run(stream), name_, "run");
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(name_ + ": launch: " + cudaGetErrorString(e));
  }

 private:
  std::string name_;
  typename G::Arguments args_;
  bool reset_each_run_;
  G gemm_;
  cuda::DeviceBuffer workspace_;
};

// The operands' pointers and strides; the epilogue's own arguments are `fill`'s.
template <class G, class Fill>
typename G::Arguments arguments(const GeluGemmOperands& o, Fill fill) {
  using Kernel = typename G::GemmKernel;
  const int64_t m = o.m, n = o.n, k = o.k;
  typename G::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {o.m, o.n, o.k, 1};
  args.mainloop.ptr_A = reinterpret_cast<const Bf16*>(o.a);
  args.mainloop.dA = packed_stride<typename Kernel::StrideA>(m, k);
  args.mainloop.ptr_B = reinterpret_cast<const Bf16*>(o.b);
  args.mainloop.dB = packed_stride<typename Kernel::StrideB>(n, k);
  args.epilogue.ptr_D = reinterpret_cast<Bf16*>(o.d);
  args.epilogue.dD = packed_stride<typename Kernel::StrideD>(m, n);
  args.epilogue.dC = args.epilogue.dD;
  fill(args.epilogue.thread, o);
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) throw std::runtime_error("cudaGetDevice failed");
  args.hw_info.device_id = device;
  args.hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);
  return args;
}

// The epilogues' arguments, one per product (alpha 1, beta 0: D is written, never accumulated).
struct FillForward {
  template <class T>
  void operator()(T& t, const GeluGemmOperands& o) const {
    t.bias_ptr = reinterpret_cast<const Bf16*>(o.bias);
    t.aux_ptr = reinterpret_cast<Bf16*>(o.aux_out);
    t.dAux = packed_stride<decltype(t.dAux)>(o.m, o.n);
  }
};
struct FillBackward {
  template <class T>
  void operator()(T& t, const GeluGemmOperands& o) const {
    t.aux_ptr = reinterpret_cast<const Bf16*>(o.aux_in);
    t.dAux = packed_stride<decltype(t.dAux)>(o.m, o.n);
  }
};
struct FillBackwardBiasGrad {
  template <class T>
  void operator()(T& t, const GeluGemmOperands& o) const {
    FillBackward{}(t, o);
    t.dbias_ptr = o.dbias;
  }
};
struct FillBias {
  template <class T>
  void operator()(T& t, const GeluGemmOperands& o) const {
    t.bias_ptr = reinterpret_cast<const Bf16*>(o.bias);
  }
};
struct FillNone {
  template <class T>
  void operator()(T&, const GeluGemmOperands&) const {}
};

template <class G, class Fill>
GeluGemmVariant variant(const std::string& config, GeluProduct product, Fill fill) {
  const std::string name = "cutlass " + config;
  return {name, product, [name, product, fill](const GeluGemmOperands& o) {
            return std::unique_ptr<GeluGemmLaunch>(std::make_unique<Launch<G>>(
                name, arguments<G>(o, fill), product == GeluProduct::kBackwardBiasGrad));
          }};
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
using cutlass::layout::ColumnMajor;
using cutlass::layout::RowMajor;
template <class Tile, class Cluster, class Schedule, class Fusion>
using ForwardGemm =
    typename Gemm<RowMajor, ColumnMajor, RowMajor, Tile, Cluster, Schedule, Fusion>::Adapter;
template <class Tile, class Cluster, class Schedule, class Fusion>
using BackwardGemm =
    typename Gemm<RowMajor, RowMajor, RowMajor, Tile, Cluster, Schedule, Fusion>::Adapter;
template <class Tile, class Cluster, class Schedule, class Fusion>
using TransposedBackwardGemm =
    typename Gemm<ColumnMajor, ColumnMajor, ColumnMajor, Tile, Cluster, Schedule, Fusion>::Adapter;

}  // namespace railyard::bench::sm90
