// The residual forwards as CUTLASS Hopper kernels (residual_gemm_cutlass.hpp), one type per
// tile configuration. This unit alone is compiled for sm_90a: the kernels' wgmma and TMA
// instructions exist only there.
#include "residual_gemm_cutlass.hpp"

#include <string>

#include "cutlass_sm90_launcher.cuh"

namespace railyard::cuda {
namespace {

void check_operands(const std::string& name, const bf16* y, const bf16* x, int ldx, const bf16* w,
                    const bf16* bias, const bf16* residual, int N, int I, int O) {
  sm90::require_forward_shape(name, N, I, O, ldx);
  sm90::require_aligned(y, name, "Y");
  sm90::require_aligned(x, name, "X");
  sm90::require_aligned(w, name, "W");
  sm90::require_aligned(bias, name, "the bias");
  sm90::require_aligned(residual, name, "the residual (C)");
  sm90::require(residual != y, name,
                "the residual is Y itself: pass the sum's own buffer (C and D distinct, as "
                "cuBLASLt's residual product)");
}

}  // namespace

struct CutlassResidualForward::Kernel {
  virtual ~Kernel() = default;
  virtual void run(bf16* y, const bf16* x, int ldx, const bf16* w, const bf16* bias,
                   const bf16* residual, int N, int I, int O, cudaStream_t stream) = 0;
};

template <class G>
struct CutlassResidualForward::KernelOf final : Kernel {
  sm90::Launcher<G> launcher;
  explicit KernelOf(const char* name) : launcher(name, "cuBLASLt's residual product") {}

  // The forward's operands; C = the residual with beta 1, the bias per output column.
  void run(bf16* y, const bf16* x, int ldx, const bf16* w, const bf16* bias, const bf16* residual,
           int N, int I, int O, cudaStream_t stream) override {
    typename G::Arguments args = sm90::forward_arguments<G>(y, x, ldx, w, N, I, O);
    args.epilogue.ptr_C = reinterpret_cast<const sm90::Bf16*>(residual);
    auto& t = args.epilogue.thread;
    t.bias_ptr = reinterpret_cast<const sm90::Bf16*>(bias);
    t.alpha = 1.0f;
    t.beta = 1.0f;
    launcher.run(args, stream);
  }
};

const char* CutlassResidualForward::name(Tile t) {
  switch (t) {
    case Tile::kPingpong128x128:
      return "CUTLASS residual forward (128x128x64 c1x2 ping-pong)";
    case Tile::kCooperative256x128:
      return "CUTLASS residual forward (256x128x64 c2x1 cooperative)";
    case Tile::kCooperative128x256:
      return "CUTLASS residual forward (128x256x64 c2x1 cooperative)";
  }
  return "CUTLASS residual forward (unknown tile)";
}

bool CutlassResidualForward::supports(int device) {
  return sm90::is_sm90(device);
}

CutlassResidualForward::CutlassResidualForward(Tile tile) : tile_(tile) {
  switch (tile) {
    case Tile::kPingpong128x128:
      kernel_ = std::make_unique<KernelOf<sm90::ResidualPingpong128x128>>(name(tile));
      break;
    case Tile::kCooperative256x128:
      kernel_ = std::make_unique<KernelOf<sm90::ResidualCooperative256x128>>(name(tile));
      break;
    case Tile::kCooperative128x256:
      kernel_ = std::make_unique<KernelOf<sm90::ResidualCooperative128x256>>(name(tile));
      break;
  }
  if (!kernel_) throw std::invalid_argument(name(tile));
}

CutlassResidualForward::~CutlassResidualForward() = default;

void CutlassResidualForward::run(bf16* y, const bf16* x, int ldx, const bf16* w, const bf16* bias,
                                 const bf16* residual, int N, int I, int O, cudaStream_t stream) {
  check_operands(name(tile_), y, x, ldx, w, bias, residual, N, I, O);
  kernel_->run(y, x, ldx, w, bias, residual, N, I, O, stream);
}

}  // namespace railyard::cuda
