#pragma once
// How the engine's CUTLASS products (gelu_gemm_cutlass, residual_gemm_cutlass) check their
// operands and launch: refusals that name the operand at fault (std::invalid_argument), the
// device check (compute capability 9.0: the kernels are built for sm_90a alone), and one
// initialize() then update() per call with no workspace, so that a call allocates nothing and can
// be captured in a CUDA graph once it has run eagerly (the first call sets the kernel's
// shared-memory attribute). Include only from units compiled for sm_90a alone (as
// cutlass_sm90_gemm.cuh).

#include <cutlass/kernel_hardware_info.h>
#include <cutlass/version.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "cuda_check.hpp"
#include "cutlass_sm90_gemm.cuh"

namespace railyard::cuda::sm90 {

inline void require(bool ok, const std::string& kernel, const std::string& what) {
  if (!ok) throw std::invalid_argument(kernel + ": " + what);
}

// TMA reads and writes whole 16-byte units: every base address and row stride must be on one.
// The epilogues read and write every operand they name unconditionally: none may be missing.
inline void require_aligned(const void* p, const std::string& kernel, const std::string& operand) {
  require(p != nullptr, kernel, operand + " is null: this kernel needs every operand");
  require(reinterpret_cast<uintptr_t>(p) % 16 == 0, kernel,
          operand +
              " is not on a 16-byte boundary (TMA's rule): allocate or offset it on 16 bytes (8 "
              "bf16 elements)");
}

// The shape rules of a forward product Y[N,O] = X[N,I] W[O,I]^T whose X rows lie ldx apart.
inline void require_forward_shape(const std::string& kernel, int N, int I, int O, int ldx) {
  require(N > 0 && I > 0 && O > 0, kernel,
          "empty product: N " + std::to_string(N) + ", I " + std::to_string(I) + ", O " +
              std::to_string(O));
  require(I % kAlign == 0 && O % kAlign == 0, kernel,
          "I (" + std::to_string(I) + ") and O (" + std::to_string(O) +
              ") must be multiples of 8 (16-byte rows for TMA): use cuBLASLt for this shape");
  require(ldx >= I && ldx % kAlign == 0, kernel,
          "X's row stride " + std::to_string(ldx) + " must be >= I (" + std::to_string(I) +
              ") and a multiple of 8 elements (16 bytes, TMA's rule): pad X's rows to one");
}

// A forward product's operands: row-major X [N,I] with rows ldx apart, W [O,I] (a Linear
// weight), Y [N,O]; C, where the product has one, is laid out as Y. The epilogue's own arguments
// (bias, aux, beta) are the caller's.
template <class G, class T>
typename G::Arguments forward_arguments(T* y, const T* x, int ldx, const T* w, int N, int I,
                                        int O) {
  using Kernel = typename G::GemmKernel;
  typename G::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {N, O, I, 1};
  args.mainloop.ptr_A = reinterpret_cast<const Bf16*>(x);
  args.mainloop.dA = strided<typename Kernel::StrideA>(N, I, ldx);
  args.mainloop.ptr_B = reinterpret_cast<const Bf16*>(w);
  args.mainloop.dB = packed_stride<typename Kernel::StrideB>(O, I);
  args.epilogue.ptr_D = reinterpret_cast<Bf16*>(y);
  args.epilogue.dD = packed_stride<typename Kernel::StrideD>(N, O);
  args.epilogue.dC = args.epilogue.dD;
  return args;
}

inline bool is_sm90(int device) {
  int major = 0, minor = 0;
  RY_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  RY_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
}

// One kernel type G for the current device; `fallback` says what to use where it cannot run.
template <class G>
class Launcher {
 public:
  Launcher(std::string name, const std::string& fallback) : name_(std::move(name)) {
    int device = 0;
    RY_CUDA(cudaGetDevice(&device));
    if (!is_sm90(device)) {
      throw std::runtime_error(name_ + ": device " + std::to_string(device) +
                               " is not compute capability 9.0 (the kernel is built for sm_90a "
                               "only): use " +
                               fallback + " there");
    }
    hw_.device_id = device;
    RY_CUDA(cudaDeviceGetAttribute(&hw_.sm_count, cudaDevAttrMultiProcessorCount, device));
  }

  const std::string& name() const { return name_; }

  void run(typename G::Arguments args, cudaStream_t stream) {
    args.hw_info = hw_;
    check(G::can_implement(args), name_, "can_implement");
    // The persistent data-parallel scheduler and these epilogues keep nothing in a workspace; a
    // CUTLASS that wants one would need it allocated outside the step's graph.
    const size_t workspace = G::get_workspace_size(args);
    if (workspace != 0) {
      throw std::runtime_error(name_ + ": CUTLASS " + cutlass::getVersionString() + " asks for " +
                               std::to_string(workspace) +
                               " bytes of workspace, which this kernel never needed: build with "
                               "nvidia-cutlass 4.2.0.0 (scripts/bootstrap) or "
                               "-DRAILYARD_CUTLASS=OFF");
    }
    if (!initialized_) {
      check(gemm_.initialize(args, nullptr, stream), name_, "initialize");
      initialized_ = true;
    } else {
      check(gemm_.update(args), name_, "update");
    }
    // run() asks cudaGetLastError after the launch itself (and so clears it): a failed launch
    // is its kErrorInternal.
    check(gemm_.run(stream), name_, "run (the kernel launch)");
  }

 private:
  std::string name_;
  G gemm_;
  cutlass::KernelHardwareInfo hw_;
  bool initialized_ = false;  // the first run() sets the kernel's shared-memory attribute
};

}  // namespace railyard::cuda::sm90
