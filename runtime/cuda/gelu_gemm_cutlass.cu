// The fc forward as CUTLASS's ping-pong kernel (gelu_gemm_cutlass.hpp). This unit alone is
// compiled for sm_90a: the kernel's wgmma and TMA instructions exist only there.
#include "gelu_gemm_cutlass.hpp"

#include <cutlass/version.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "cutlass_sm90_gemm.cuh"

namespace railyard::cuda {
namespace {

using Gemm = sm90::GeluForwardPingpong;
constexpr const char* kName = "CUTLASS fc forward (128x128x64 c1x2 ping-pong)";

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(kName) + ": " + what);
}

// TMA reads and writes whole 16-byte units: every base address and row stride must be on one.
// The epilogue reads the bias and writes pre unconditionally: none may be missing.
void require_aligned(const void* p, const char* operand) {
  require(p != nullptr, std::string(operand) + " is null: this kernel needs every operand");
  require(reinterpret_cast<uintptr_t>(p) % 16 == 0,
          std::string(operand) +
              " is not on a 16-byte boundary (TMA's rule): allocate or offset it "
              "on 16 bytes (8 bf16 elements)");
}

void check_operands(const bf16* y, const bf16* pre, const bf16* x, int ldx, const bf16* w,
                    const bf16* bias, int N, int I, int O) {
  require(N > 0 && I > 0 && O > 0, "empty product: N " + std::to_string(N) + ", I " +
                                       std::to_string(I) + ", O " + std::to_string(O));
  require(I % sm90::kAlign == 0 && O % sm90::kAlign == 0,
          "I (" + std::to_string(I) + ") and O (" + std::to_string(O) +
              ") must be multiples of 8 (16-byte rows for TMA): use cuBLASLt for this shape");
  require(ldx >= I && ldx % sm90::kAlign == 0,
          "X's row stride " + std::to_string(ldx) + " must be >= I (" + std::to_string(I) +
              ") and a multiple of 8 elements (16 bytes, TMA's rule): pad X's rows to one");
  require_aligned(y, "Y");
  require_aligned(pre, "the value before GELU (pre)");
  require_aligned(x, "X");
  require_aligned(w, "W");
  require_aligned(bias, "the bias");
}

// The operands' pointers and strides (row-major X [N,I] with rows ldx apart, W [O,I], Y and pre
// [N,O]); alpha 1 and beta 0 are the fusion's defaults.
Gemm::Arguments arguments(bf16* y, bf16* pre, const bf16* x, int ldx, const bf16* w,
                          const bf16* bias, int N, int I, int O,
                          const cutlass::KernelHardwareInfo& hw) {
  using Kernel = Gemm::GemmKernel;
  Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {N, O, I, 1};
  args.mainloop.ptr_A = reinterpret_cast<const sm90::Bf16*>(x);
  args.mainloop.dA = sm90::strided<Kernel::StrideA>(N, I, ldx);
  args.mainloop.ptr_B = reinterpret_cast<const sm90::Bf16*>(w);
  args.mainloop.dB = sm90::packed_stride<Kernel::StrideB>(O, I);
  args.epilogue.ptr_D = reinterpret_cast<sm90::Bf16*>(y);
  args.epilogue.dD = sm90::packed_stride<Kernel::StrideD>(N, O);
  args.epilogue.dC = args.epilogue.dD;
  auto& t = args.epilogue.thread;
  t.bias_ptr = reinterpret_cast<const sm90::Bf16*>(bias);
  t.aux_ptr = reinterpret_cast<sm90::Bf16*>(pre);
  t.dAux = sm90::packed_stride<decltype(t.dAux)>(N, O);
  args.hw_info = hw;
  return args;
}

}  // namespace

struct CutlassGeluForward::Kernel {
  Gemm gemm;
  cutlass::KernelHardwareInfo hw;
  bool initialized = false;  // the first run() sets the kernel's shared-memory attribute
};

bool CutlassGeluForward::supports(int device) {
  int major = 0, minor = 0;
  RY_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RY_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
}

CutlassGeluForward::CutlassGeluForward() : kernel_(std::make_unique<Kernel>()) {
  int device = 0;
  RY_CUDA(cudaGetDevice(&device));
  if (!supports(device)) {
    throw std::runtime_error(std::string(kName) + ": device " + std::to_string(device) +
                             " is not compute capability 9.0 (the kernel is built for sm_90a "
                             "only): use cuBLASLt's GELU epilogue there");
  }
  kernel_->hw.device_id = device;
  RY_CUDA(cudaDeviceGetAttribute(&kernel_->hw.sm_count, cudaDevAttrMultiProcessorCount, device));
}

CutlassGeluForward::~CutlassGeluForward() = default;

void CutlassGeluForward::run(bf16* y, bf16* pre, const bf16* x, int ldx, const bf16* w,
                             const bf16* bias, int N, int I, int O, cudaStream_t stream) {
  check_operands(y, pre, x, ldx, w, bias, N, I, O);
  const Gemm::Arguments args = arguments(y, pre, x, ldx, w, bias, N, I, O, kernel_->hw);
  sm90::check(Gemm::can_implement(args), kName, "can_implement");
  // The persistent data-parallel scheduler and this epilogue keep nothing in a workspace; a
  // CUTLASS that wants one would need it allocated outside the step's graph.
  const size_t workspace = Gemm::get_workspace_size(args);
  if (workspace != 0) {
    throw std::runtime_error(
        std::string(kName) + ": CUTLASS " + cutlass::getVersionString() + " asks for " +
        std::to_string(workspace) +
        " bytes of workspace, which this kernel never needed: build with "
        "nvidia-cutlass 4.2.0.0 (scripts/bootstrap) or -DRAILYARD_CUTLASS=OFF");
  }
  Gemm& gemm = kernel_->gemm;
  if (!kernel_->initialized) {
    sm90::check(gemm.initialize(args, nullptr, stream), kName, "initialize");
    kernel_->initialized = true;
  } else {
    sm90::check(gemm.update(args), kName, "update");
  }
  // run() asks cudaGetLastError after the launch itself (and so clears it): a failed launch is
  // its kErrorInternal.
  sm90::check(gemm.run(stream), kName, "run (the kernel launch)");
}

}  // namespace railyard::cuda
