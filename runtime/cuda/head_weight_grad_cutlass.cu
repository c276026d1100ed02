// The LM head's weight gradient as CUTLASS Hopper kernels (head_weight_grad_cutlass.hpp), one
// type per tile configuration. This unit alone is compiled for sm_90a: the kernels' wgmma and TMA
// instructions exist only there.
#include "head_weight_grad_cutlass.hpp"

#include "cutlass_sm90_launcher.cuh"

namespace railyard::cuda {

struct CutlassHeadWeightGrad::Kernel {
  virtual ~Kernel() = default;
  virtual void run(float* dw, const bf16* dy, const bf16* x, int N, int I, int O, bool accumulate,
                   cudaStream_t stream) = 0;
};

template <class G>
struct CutlassHeadWeightGrad::KernelOf final : Kernel {
  sm90::Launcher<G> launcher;
  explicit KernelOf(const char* name) : launcher(name, "cuBLASLt's weight-gradient product") {}
  void run(float* dw, const bf16* dy, const bf16* x, int N, int I, int O, bool accumulate,
           cudaStream_t stream) override {
    launcher.run(sm90::weight_grad_arguments<G>(dw, dy, x, N, I, O, I, accumulate), stream);
  }
};

const char* CutlassHeadWeightGrad::name(Tile t) {
  switch (t) {
    case Tile::kPingpong128x128:
      return "CUTLASS head weight gradient (128x128x64 c1x2 ping-pong)";
    case Tile::kCooperative256x128:
      return "CUTLASS head weight gradient (256x128x64 c2x1 cooperative)";
    case Tile::kCooperative128x256:
      return "CUTLASS head weight gradient (128x256x64 c2x1 cooperative)";
  }
  return "CUTLASS head weight gradient (unknown tile)";
}

bool CutlassHeadWeightGrad::supports(int device) {
  return sm90::is_sm90(device);
}

CutlassHeadWeightGrad::CutlassHeadWeightGrad(Tile tile) : tile_(tile) {
  switch (tile) {
    case Tile::kPingpong128x128:
      kernel_ = std::make_unique<KernelOf<sm90::HeadWeightGradPingpong128x128>>(name(tile));
      break;
    case Tile::kCooperative256x128:
      kernel_ = std::make_unique<KernelOf<sm90::HeadWeightGradCooperative256x128>>(name(tile));
      break;
    case Tile::kCooperative128x256:
      kernel_ = std::make_unique<KernelOf<sm90::HeadWeightGradCooperative128x256>>(name(tile));
      break;
  }
  if (!kernel_) throw std::invalid_argument(name(tile));
}

CutlassHeadWeightGrad::~CutlassHeadWeightGrad() = default;

void CutlassHeadWeightGrad::run(float* dw, const bf16* dy, const bf16* x, int N, int I, int O,
                                bool accumulate, cudaStream_t stream) {
  sm90::require_weight_grad_operands(name(tile_), dw, dy, x, N, I, O, I);
  kernel_->run(dw, dy, x, N, I, O, accumulate, stream);
}

}  // namespace railyard::cuda
