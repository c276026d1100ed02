#pragma once
// How the bench's CUTLASS products (cutlass_gelu_gemms.hpp) are set up and launched: the kernels
// are assembled as runtime/cuda/cutlass_sm90_gemm.cuh says (the engine's fc forward is one of
// them); here, their arguments from the bench's operands, one launch object per configuration.
// Included only by the cutlass_gelu_*.cu files, which are compiled for sm_90a alone.

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "cutlass_gelu_gemms.hpp"
#include "cutlass_sm90_gemm.cuh"
#include "device_buffer.hpp"

namespace railyard::bench::sm90 {

using cuda::sm90::BackwardGelu;
using cuda::sm90::BackwardGeluBiasGrad;
using cuda::sm90::BackwardGemm;
using cuda::sm90::Bf16;
using cuda::sm90::check;
using cuda::sm90::Cooperative;
using cuda::sm90::ForwardBias;
using cuda::sm90::ForwardGelu;
using cuda::sm90::ForwardGemm;
using cuda::sm90::GeluForwardPingpong;
using cuda::sm90::packed_stride;
using cuda::sm90::Pingpong;
using cuda::sm90::Plain;
using cuda::sm90::TransposedBackwardGemm;

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

}  // namespace railyard::bench::sm90
