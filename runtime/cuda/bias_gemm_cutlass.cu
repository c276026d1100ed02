// The bias-only forwards as CUTLASS Hopper kernels (bias_gemm_cutlass.hpp), one type per tile
// configuration, assembled as cutlass_sm90_gemm.cuh says (no C operand: the epilogue's shared
// memory goes to the mainloop's stages). This unit alone is compiled for sm_90a: the kernels'
// wgmma and TMA instructions exist only there.
#include "bias_gemm_cutlass.hpp"

#include <string>

#include "cutlass_sm90_launcher.cuh"

namespace railyard::cuda {
namespace {

using cute::_1;
using cute::_128;
using cute::_192;
using cute::_2;
using cute::_256;
using cute::_64;
using cute::Shape;
using Cluster1x2 = Shape<_1, _2, _1>;
using Cluster2x1 = Shape<_2, _1, _1>;  // 2304 / 256 = 9 column tiles: no pair along N
using Pingpong128x128 =
    sm90::ForwardGemm<Shape<_128, _128, _64>, Cluster1x2, sm90::Pingpong, sm90::ForwardBias>;
using Cooperative128x256 =
    sm90::ForwardGemm<Shape<_128, _256, _64>, Cluster2x1, sm90::Cooperative, sm90::ForwardBias>;
using Cooperative128x192 =
    sm90::ForwardGemm<Shape<_128, _192, _64>, Cluster1x2, sm90::Cooperative, sm90::ForwardBias>;

void check_operands(const std::string& name, const bf16* y, const bf16* x, int ldx, const bf16* w,
                    const bf16* bias, int N, int I, int O) {
  sm90::require_forward_shape(name, N, I, O, ldx);
  sm90::require_aligned(y, name, "Y");
  sm90::require_aligned(x, name, "X");
  sm90::require_aligned(w, name, "W");
  sm90::require_aligned(bias, name, "the bias");
}

}  // namespace

struct CutlassBiasForward::Kernel {
  virtual ~Kernel() = default;
  virtual void run(bf16* y, const bf16* x, int ldx, const bf16* w, const bf16* bias, int N, int I,
                   int O, cudaStream_t stream) = 0;
};

template <class G>
struct CutlassBiasForward::KernelOf final : Kernel {
  sm90::Launcher<G> launcher;
  explicit KernelOf(const char* name) : launcher(name, "cuBLASLt's BIAS epilogue") {}

  // The forward's operands and the bias per output column; alpha 1 and beta 0 are the fusion's
  // defaults (no C).
  void run(bf16* y, const bf16* x, int ldx, const bf16* w, const bf16* bias, int N, int I, int O,
           cudaStream_t stream) override {
    typename G::Arguments args = sm90::forward_arguments<G>(y, x, ldx, w, N, I, O);
    args.epilogue.thread.bias_ptr = reinterpret_cast<const sm90::Bf16*>(bias);
    launcher.run(args, stream);
  }
};

const char* CutlassBiasForward::name(Tile t) {
  switch (t) {
    case Tile::kPingpong128x128:
      return "CUTLASS bias forward (128x128x64 c1x2 ping-pong)";
    case Tile::kCooperative128x256:
      return "CUTLASS bias forward (128x256x64 c2x1 cooperative)";
    case Tile::kCooperative128x192:
      return "CUTLASS bias forward (128x192x64 c1x2 cooperative)";
  }
  return "CUTLASS bias forward (unknown tile)";
}

bool CutlassBiasForward::supports(int device) {
  return sm90::is_sm90(device);
}

CutlassBiasForward::CutlassBiasForward(Tile tile) : tile_(tile) {
  switch (tile) {
    case Tile::kPingpong128x128:
      kernel_ = std::make_unique<KernelOf<Pingpong128x128>>(name(tile));
      break;
    case Tile::kCooperative128x256:
      kernel_ = std::make_unique<KernelOf<Cooperative128x256>>(name(tile));
      break;
    case Tile::kCooperative128x192:
      kernel_ = std::make_unique<KernelOf<Cooperative128x192>>(name(tile));
      break;
  }
  if (!kernel_) throw std::invalid_argument(name(tile));
}

CutlassBiasForward::~CutlassBiasForward() = default;

void CutlassBiasForward::run(bf16* y, const bf16* x, int ldx, const bf16* w, const bf16* bias,
                             int N, int I, int O, cudaStream_t stream) {
  check_operands(name(tile_), y, x, ldx, w, bias, N, I, O);
  kernel_->run(y, x, ldx, w, bias, N, I, O, stream);
}

}  // namespace railyard::cuda
