// The LM head's weight gradient as CUTLASS Hopper kernels (head_weight_grad_cutlass.hpp), one
// type per tile configuration. This unit alone is compiled for sm_90a: the kernels' wgmma and TMA
// instructions exist only there.
#include "head_weight_grad_cutlass.hpp"

#include <string>

#include "cutlass_sm90_launcher.cuh"

namespace railyard::cuda {
namespace {

void check_operands(const std::string& name, const float* dw, const bf16* dy, const bf16* x, int N,
                    int I, int O) {
  sm90::require(N > 0 && I > 0 && O > 0, name,
                "empty product: N " + std::to_string(N) + ", I " + std::to_string(I) + ", O " +
                    std::to_string(O));
  sm90::require(I % sm90::kAlign == 0 && O % sm90::kAlign == 0, name,
                "I (" + std::to_string(I) + ") and O (" + std::to_string(O) +
                    ") must be multiples of 8 (16-byte rows for TMA): use cuBLASLt for this shape");
  sm90::require_aligned(dw, name, "dW");
  sm90::require_aligned(dy, name, "dY");
  sm90::require_aligned(x, name, "X");
}

// M = O (dY's columns), N = I (X's columns), K = N positions: A[M,K] = dY^T with dY's rows O
// apart, B[N,K] = X^T with X's rows I apart, D[M,N] = dW row-major, C = D.
template <class G>
typename G::Arguments arguments(float* dw, const bf16* dy, const bf16* x, int N, int I, int O,
                                bool accumulate) {
  using K = typename G::GemmKernel;
  typename G::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {O, I, N, 1};
  args.mainloop.ptr_A = reinterpret_cast<const sm90::Bf16*>(dy);
  args.mainloop.dA = sm90::strided<typename K::StrideA>(O, N, O);
  args.mainloop.ptr_B = reinterpret_cast<const sm90::Bf16*>(x);
  args.mainloop.dB = sm90::strided<typename K::StrideB>(I, N, I);
  args.epilogue.ptr_C = dw;
  args.epilogue.ptr_D = dw;
  args.epilogue.dD = sm90::packed_stride<typename K::StrideD>(O, I);
  args.epilogue.dC = args.epilogue.dD;
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = accumulate ? 1.0f : 0.0f;  // beta 0: the epilogue skips C's load
  return args;
}

}  // namespace

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
    launcher.run(arguments<G>(dw, dy, x, N, I, O, accumulate), stream);
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
  check_operands(name(tile_), dw, dy, x, N, I, O);
  kernel_->run(dw, dy, x, N, I, O, accumulate, stream);
}

}  // namespace railyard::cuda
