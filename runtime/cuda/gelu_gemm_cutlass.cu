// The MLP's GELU products as CUTLASS's ping-pong kernels (gelu_gemm_cutlass.hpp). This unit alone
// is compiled for sm_90a: the kernels' wgmma and TMA instructions exist only there.
#include "gelu_gemm_cutlass.hpp"

#include <cutlass/version.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "cutlass_sm90_gemm.cuh"

namespace railyard::cuda {
namespace {

constexpr const char* kForwardName = "CUTLASS fc forward (128x128x64 c1x2 ping-pong)";
constexpr const char* kBackwardName =
    "CUTLASS fc2 backward-input with dGELU (128x128x64 c1x2 ping-pong)";

void require(bool ok, const char* name, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(name) + ": " + what);
}

// TMA reads and writes whole 16-byte units: every base address and row stride must be on one.
// The epilogues read the bias or the value before GELU unconditionally: none may be missing.
void require_aligned(const void* p, const char* name, const char* operand) {
  require(p != nullptr, name, std::string(operand) + " is null: this kernel needs every operand");
  require(reinterpret_cast<uintptr_t>(p) % 16 == 0, name,
          std::string(operand) +
              " is not on a 16-byte boundary (TMA's rule): allocate or offset it "
              "on 16 bytes (8 bf16 elements)");
}

void require_shape(const char* name, int N, int I, int O) {
  require(N > 0 && I > 0 && O > 0, name,
          "empty product: N " + std::to_string(N) + ", I " + std::to_string(I) + ", O " +
              std::to_string(O));
  require(I % sm90::kAlign == 0 && O % sm90::kAlign == 0, name,
          "I (" + std::to_string(I) + ") and O (" + std::to_string(O) +
              ") must be multiples of 8 (16-byte rows for TMA): use cuBLASLt for this shape");
}

void check_forward(const bf16* y, const bf16* pre, const bf16* x, int ldx, const bf16* w,
                   const bf16* bias, int N, int I, int O) {
  require_shape(kForwardName, N, I, O);
  require(ldx >= I && ldx % sm90::kAlign == 0, kForwardName,
          "X's row stride " + std::to_string(ldx) + " must be >= I (" + std::to_string(I) +
              ") and a multiple of 8 elements (16 bytes, TMA's rule): pad X's rows to one");
  require_aligned(y, kForwardName, "Y");
  require_aligned(pre, kForwardName, "the value before GELU (pre)");
  require_aligned(x, kForwardName, "X");
  require_aligned(w, kForwardName, "W");
  require_aligned(bias, kForwardName, "the bias");
}

void check_backward(const bf16* dx, const bf16* dy, const bf16* w, const bf16* pre, int N, int I,
                    int O) {
  require_shape(kBackwardName, N, I, O);
  require_aligned(dx, kBackwardName, "dX");
  require_aligned(dy, kBackwardName, "dY");
  require_aligned(w, kBackwardName, "W");
  require_aligned(pre, kBackwardName, "the value before GELU (pre)");
}

// The device's SMs for CUTLASS's persistent scheduler; throws where the kernels cannot run.
cutlass::KernelHardwareInfo current_device(const char* name) {
  int device = 0;
  RY_CUDA(cudaGetDevice(&device));
  if (!cutlass_sm90_supports(device)) {
    throw std::runtime_error(std::string(name) + ": device " + std::to_string(device) +
                             " is not compute capability 9.0 (the kernel is built for sm_90a "
                             "only): use cuBLASLt's GELU epilogues there");
  }
  cutlass::KernelHardwareInfo hw;
  hw.device_id = device;
  RY_CUDA(cudaDeviceGetAttribute(&hw.sm_count, cudaDevAttrMultiProcessorCount, device));
  return hw;
}

// One kernel instantiation with what its launches share: the device and whether the kernel's
// shared-memory attribute is set (the first launch's initialize()).
template <class Gemm>
struct Prepared {
  using Args = typename Gemm::Arguments;
  using GemmKernel = typename Gemm::GemmKernel;
  Gemm gemm;
  cutlass::KernelHardwareInfo hw;
  bool initialized = false;

  // The product D[M,N] = A[M,K] B (as the strides say) with D packed row-major; the epilogue's
  // own operands are the caller's. alpha 1 and beta 0 are the fusions' defaults.
  Args arguments(int M, int N, int K, const bf16* a, typename GemmKernel::StrideA dA, const bf16* b,
                 typename GemmKernel::StrideB dB, bf16* d) const {
    Args args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = {M, N, K, 1};
    args.mainloop.ptr_A = reinterpret_cast<const sm90::Bf16*>(a);
    args.mainloop.dA = dA;
    args.mainloop.ptr_B = reinterpret_cast<const sm90::Bf16*>(b);
    args.mainloop.dB = dB;
    args.epilogue.ptr_D = reinterpret_cast<sm90::Bf16*>(d);
    args.epilogue.dD = sm90::packed_stride<typename GemmKernel::StrideD>(M, N);
    args.epilogue.dC = args.epilogue.dD;
    args.hw_info = hw;
    return args;
  }

  void launch(const Args& args, const char* name, cudaStream_t stream) {
    sm90::check(Gemm::can_implement(args), name, "can_implement");
    // The persistent data-parallel scheduler and these epilogues keep nothing in a workspace; a
    // CUTLASS that wants one would need it allocated outside the step's graph.
    const size_t workspace = Gemm::get_workspace_size(args);
    if (workspace != 0) {
      throw std::runtime_error(
          std::string(name) + ": CUTLASS " + cutlass::getVersionString() + " asks for " +
          std::to_string(workspace) +
          " bytes of workspace, which this kernel never needed: build with "
          "nvidia-cutlass 4.2.0.0 (scripts/bootstrap) or -DRAILYARD_CUTLASS=OFF");
    }
    if (!initialized) {
      sm90::check(gemm.initialize(args, nullptr, stream), name, "initialize");
      initialized = true;
    } else {
      sm90::check(gemm.update(args), name, "update");
    }
    // run() asks cudaGetLastError after the launch itself (and so clears it): a failed launch
    // is its kErrorInternal.
    sm90::check(gemm.run(stream), name, "run (the kernel launch)");
  }
};

}  // namespace

bool cutlass_sm90_supports(int device) {
  int major = 0, minor = 0;
  RY_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RY_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
}

struct CutlassGeluForward::Kernel : Prepared<sm90::GeluForwardPingpong> {};
struct CutlassGeluBackward::Kernel : Prepared<sm90::GeluBackwardPingpong> {};

CutlassGeluForward::CutlassGeluForward() : kernel_(std::make_unique<Kernel>()) {
  kernel_->hw = current_device(kForwardName);
}

CutlassGeluForward::~CutlassGeluForward() = default;

// Row-major X [N,I] with rows ldx apart, W [O,I] (CUTLASS's K-major B), Y and pre [N,O].
void CutlassGeluForward::run(bf16* y, bf16* pre, const bf16* x, int ldx, const bf16* w,
                             const bf16* bias, int N, int I, int O, cudaStream_t stream) {
  check_forward(y, pre, x, ldx, w, bias, N, I, O);
  using K = Kernel::GemmKernel;
  Kernel::Args args = kernel_->arguments(N, O, I, x, sm90::strided<K::StrideA>(N, I, ldx), w,
                                         sm90::packed_stride<K::StrideB>(O, I), y);
  auto& t = args.epilogue.thread;
  t.bias_ptr = reinterpret_cast<const sm90::Bf16*>(bias);
  t.aux_ptr = reinterpret_cast<sm90::Bf16*>(pre);
  t.dAux = sm90::packed_stride<decltype(t.dAux)>(N, O);
  kernel_->launch(args, kForwardName, stream);
}

CutlassGeluBackward::CutlassGeluBackward() : kernel_(std::make_unique<Kernel>()) {
  kernel_->hw = current_device(kBackwardName);
}

CutlassGeluBackward::~CutlassGeluBackward() = default;

// The GEMM's M is the tokens (N), its N the inputs (I), its K the outputs (O): A is dY [N,O]
// row-major, B is W [O,I] row-major (CUTLASS's N-major [K,N]), D and the value before GELU
// [N,I] row-major.
void CutlassGeluBackward::run(bf16* dx, const bf16* dy, const bf16* w, const bf16* pre, int N,
                              int I, int O, cudaStream_t stream) {
  check_backward(dx, dy, w, pre, N, I, O);
  using K = Kernel::GemmKernel;
  Kernel::Args args = kernel_->arguments(N, I, O, dy, sm90::packed_stride<K::StrideA>(N, O), w,
                                         sm90::packed_stride<K::StrideB>(I, O), dx);
  auto& t = args.epilogue.thread;
  t.aux_ptr = reinterpret_cast<const sm90::Bf16*>(pre);
  t.dAux = sm90::packed_stride<decltype(t.dAux)>(N, I);
  kernel_->launch(args, kBackwardName, stream);
}

}  // namespace railyard::cuda
