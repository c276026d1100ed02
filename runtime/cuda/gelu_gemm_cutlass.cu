// The fc forward as CUTLASS's ping-pong kernel (gelu_gemm_cutlass.hpp). This unit alone is
// compiled for sm_90a: the kernel's wgmma and TMA instructions exist only there.
#include "gelu_gemm_cutlass.hpp"

#include "cutlass_sm90_launcher.cuh"

namespace railyard::cuda {
namespace {

using Gemm = sm90::GeluForwardPingpong;
constexpr const char* kName = "CUTLASS fc forward (128x128x64 c1x2 ping-pong)";

void check_operands(const bf16* y, const bf16* pre, const bf16* x, int ldx, const bf16* w,
                    const bf16* bias, int N, int I, int O) {
  sm90::require_forward_shape(kName, N, I, O, ldx);
  sm90::require_aligned(y, kName, "Y");
  sm90::require_aligned(pre, kName, "the value before GELU (pre)");
  sm90::require_aligned(x, kName, "X");
  sm90::require_aligned(w, kName, "W");
  sm90::require_aligned(bias, kName, "the bias");
}

// The forward's operands and the epilogue's: bias, aux (pre); alpha 1 and beta 0 are the fusion's
// defaults.
Gemm::Arguments arguments(bf16* y, bf16* pre, const bf16* x, int ldx, const bf16* w,
                          const bf16* bias, int N, int I, int O) {
  Gemm::Arguments args = sm90::forward_arguments<Gemm>(y, x, ldx, w, N, I, O);
  auto& t = args.epilogue.thread;
  t.bias_ptr = reinterpret_cast<const sm90::Bf16*>(bias);
  t.aux_ptr = reinterpret_cast<sm90::Bf16*>(pre);
  t.dAux = sm90::packed_stride<decltype(t.dAux)>(N, O);
  return args;
}

}  // namespace

struct CutlassGeluForward::Kernel {
  sm90::Launcher<Gemm> launcher{kName, "cuBLASLt's GELU epilogue"};
};

bool CutlassGeluForward::supports(int device) {
  return sm90::is_sm90(device);
}

CutlassGeluForward::CutlassGeluForward() : kernel_(std::make_unique<Kernel>()) {}

CutlassGeluForward::~CutlassGeluForward() = default;

void CutlassGeluForward::run(bf16* y, bf16* pre, const bf16* x, int ldx, const bf16* w,
                             const bf16* bias, int N, int I, int O, cudaStream_t stream) {
  check_operands(y, pre, x, ldx, w, bias, N, I, O);
  kernel_->launcher.run(arguments(y, pre, x, ldx, w, bias, N, I, O), stream);
}

}  // namespace railyard::cuda
