// The layers' weight-gradient products as CUTLASS Hopper kernels (weight_grad_cutlass.hpp), one
// type per tile configuration; how a stream-K type shares the work is an argument of each call.
// This unit alone is compiled for sm_90a: the kernels' wgmma and TMA instructions exist only
// there.
#include "weight_grad_cutlass.hpp"

#include <cutlass/gemm/kernel/tile_scheduler_params.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "cutlass_sm90_launcher.cuh"

namespace railyard::cuda {
namespace {

using cute::_1;
using cute::_112;
using cute::_128;
using cute::_2;
using cute::_64;
using StreamK = cutlass::gemm::StreamKScheduler;
using SchedulerParams = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamKParams;

// Stream-K wants the cooperative schedule (both warp groups on one tile, whose partial sums it
// passes between CTAs) and gains nothing from clusters: its units are single CTAs.
using Cooperative128x128 =
    sm90::WeightGradGemm<cute::Shape<_128, _128, _64>, cute::Shape<_1, _1, _1>, sm90::Cooperative,
                         StreamK>;
using Cooperative128x112 =
    sm90::WeightGradGemm<cute::Shape<_128, _112, _64>, cute::Shape<_1, _1, _1>, sm90::Cooperative,
                         StreamK>;
// Cluster 2x1: the rows of dW (2304, 3072, 768) are an even number of 128-row tiles; a 1x2
// cluster would round I's 7 tiles up to 8.
using Pingpong128x112 =
    sm90::WeightGradGemm<cute::Shape<_128, _112, _64>, cute::Shape<_2, _1, _1>, sm90::Pingpong>;

// The variant's decomposition for a stream-K type's scheduler, always with the deterministic
// (turnstile) sum; the persistent scheduler's arguments as they are.
template <class G>
typename G::Arguments arguments(CutlassWeightGrad::Variant v, float* dw, const bf16* dy,
                                const bf16* x, int N, int I, int O, int ldx, bool accumulate) {
  using K = typename G::GemmKernel;
  typename G::Arguments args = sm90::weight_grad_arguments<G>(dw, dy, x, N, I, O, ldx, accumulate);
  if constexpr (std::is_same_v<typename K::TileSchedulerTag, StreamK>) {
    using Mode = SchedulerParams::DecompositionMode;
    args.scheduler.reduction_mode = SchedulerParams::ReductionMode::Deterministic;
    args.scheduler.splits = v.split == CutlassWeightGrad::Split::kSplitK ? v.splits : 1;
    args.scheduler.decomposition_mode =
        v.split == CutlassWeightGrad::Split::kDataParallel ? Mode::DataParallel
        : v.split == CutlassWeightGrad::Split::kStreamK    ? Mode::StreamK
                                                           : Mode::SplitK;
  }
  return args;
}

const char* tile_name(CutlassWeightGrad::Tile t) {
  switch (t) {
    case CutlassWeightGrad::Tile::kCooperative128x128:
      return "128x128x64 c1x1 cooperative";
    case CutlassWeightGrad::Tile::kCooperative128x112:
      return "128x112x64 c1x1 cooperative";
    case CutlassWeightGrad::Tile::kPingpong128x112:
      return "128x112x64 c2x1 ping-pong";
  }
  return "unknown tile";
}

}  // namespace

struct CutlassWeightGrad::Kernel {
  virtual ~Kernel() = default;
  virtual size_t workspace_bytes(int N, int I, int O) const = 0;
  virtual size_t zeroed_tail_bytes(int N, int I, int O) const = 0;
  virtual void run(float* dw, const bf16* dy, const bf16* x, int N, int I, int O, int ldx,
                   bool accumulate, void* workspace, size_t workspace_bytes,
                   cudaStream_t stream) = 0;
};

template <class G>
struct CutlassWeightGrad::KernelOf final : Kernel {
  sm90::Launcher<G> launcher;
  Variant v;
  KernelOf(const std::string& name, Variant variant)
      : launcher(name, "cuBLASLt's weight-gradient product"), v(variant) {}
  size_t workspace_bytes(int N, int I, int O) const override {
    // Only the shape and the scheduler's arguments decide it; the pointers are not read.
    return launcher.workspace_bytes(arguments<G>(v, nullptr, nullptr, nullptr, N, I, O, I, false));
  }
  // CUTLASS 4.2's stream-K workspace: the partial tiles, then the barriers (BarrierType flags,
  // the split tiles' at most, 128-byte rounded), which initialize_workspace zeroes.
  size_t zeroed_tail_bytes(int N, int I, int O) const override {
    using K = typename G::GemmKernel;
    if constexpr (std::is_same_v<typename K::TileSchedulerTag, StreamK>) {
      if (workspace_bytes(N, I, O) == 0) return 0;
      const size_t tm = cute::size<0>(typename K::TileShape{});
      const size_t tn = cute::size<1>(typename K::TileShape{});
      const size_t tiles = (size_t(O) + tm - 1) / tm * ((size_t(I) + tn - 1) / tn);
      const size_t flags =
          tiles * K::NumMmaWarpGroups * sizeof(typename K::TileScheduler::BarrierType);
      return (flags + 127) / 128 * 128;
    } else {
      return 0;
    }
  }
  void run(float* dw, const bf16* dy, const bf16* x, int N, int I, int O, int ldx, bool accumulate,
           void* workspace, size_t bytes, cudaStream_t stream) override {
    launcher.run(arguments<G>(v, dw, dy, x, N, I, O, ldx, accumulate), stream, workspace, bytes);
  }
};

std::string CutlassWeightGrad::name(Variant v) {
  std::string split = "data-parallel";
  if (v.split == Split::kStreamK) split = "stream-K";
  if (v.split == Split::kSplitK) split = "split-K " + std::to_string(v.splits);
  return std::string("CUTLASS weight gradient (") + tile_name(v.tile) + ", " + split + ")";
}

std::string CutlassWeightGrad::tag(Variant v) {
  std::string tile = "co128x128";
  if (v.tile == Tile::kCooperative128x112) tile = "co128x112";
  if (v.tile == Tile::kPingpong128x112) tile = "pp128x112";
  std::string split = "-dp";
  if (v.split == Split::kStreamK) split = "-streamk";
  if (v.split == Split::kSplitK) split = "-splitk" + std::to_string(v.splits);
  return tile + split;
}

std::vector<CutlassWeightGrad::Variant> CutlassWeightGrad::all_variants() {
  std::vector<Variant> out;
  for (Tile t : {Tile::kCooperative128x128, Tile::kCooperative128x112}) {
    out.push_back({t, Split::kDataParallel, 1});
    out.push_back({t, Split::kStreamK, 1});
    for (int k = 2; k <= 4; ++k) out.push_back({t, Split::kSplitK, k});
  }
  out.push_back({Tile::kPingpong128x112, Split::kDataParallel, 1});
  return out;
}

bool CutlassWeightGrad::supports(int device) {
  return sm90::is_sm90(device);
}

CutlassWeightGrad::CutlassWeightGrad(Variant v) : variant_(v) {
  if ((v.split == Split::kSplitK) != (v.splits >= 2) ||
      (v.tile == Tile::kPingpong128x112 && v.split != Split::kDataParallel)) {
    throw std::invalid_argument(name(v) +
                                ": no such variant (split-K needs 2 or more parts, only split-K "
                                "has parts; the ping-pong tile is data-parallel only)");
  }
  switch (v.tile) {
    case Tile::kCooperative128x128:
      kernel_ = std::make_unique<KernelOf<Cooperative128x128>>(name(v), v);
      break;
    case Tile::kCooperative128x112:
      kernel_ = std::make_unique<KernelOf<Cooperative128x112>>(name(v), v);
      break;
    case Tile::kPingpong128x112:
      kernel_ = std::make_unique<KernelOf<Pingpong128x112>>(name(v), v);
      break;
  }
  if (!kernel_) throw std::invalid_argument(name(v) + ": unknown tile");
}

CutlassWeightGrad::~CutlassWeightGrad() = default;

size_t CutlassWeightGrad::workspace_bytes(int N, int I, int O) const {
  return kernel_->workspace_bytes(N, I, O);
}

size_t CutlassWeightGrad::zeroed_tail_bytes(int N, int I, int O) const {
  return kernel_->zeroed_tail_bytes(N, I, O);
}

void CutlassWeightGrad::run(float* dw, const bf16* dy, const bf16* x, int N, int I, int O, int ldx,
                            bool accumulate, void* workspace, size_t workspace_bytes,
                            cudaStream_t stream) {
  const std::string n = name(variant_);
  sm90::require_weight_grad_operands(n, dw, dy, x, N, I, O, ldx);
  const size_t need = kernel_->workspace_bytes(N, I, O);
  sm90::require(need <= workspace_bytes, n,
                "the workspace has " + std::to_string(workspace_bytes) + " bytes, " +
                    std::to_string(need) + " needed: size it by workspace_bytes() for this shape");
  if (need > 0) sm90::require_aligned(workspace, n, "the workspace");
  kernel_->run(dw, dy, x, N, I, O, ldx, accumulate, workspace, workspace_bytes, stream);
}

}  // namespace railyard::cuda
