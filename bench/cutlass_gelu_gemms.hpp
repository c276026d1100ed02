#pragma once
// The MLP's GELU products as CUTLASS 3.x Hopper kernels (bench/cutlass_gelu_bench.cu, issue 12):
// TMA warp-specialized GEMMs with the GELU fused in the epilogue, in a few tile, cluster and
// schedule configurations each, behind an interface free of CUTLASS types (the bench's host code
// compiles without CUTLASS's headers). Every operand is row-major, M is the token count:
//   forward   D[M,N] = GELU(A[M,K] B[N,K]^T + bias[N]), aux[M,N] = the value before GELU
//   backward  D[M,N] = (A[M,K] B[K,N]) * GELU'(aux[M,N])
//   plain     the same products without the GELU (forward with the bias), the floor to beat.
//   backward + bias gradient: the backward seen transposed (M = features, N = tokens; A is the
//             weight [K,M], B the gradient [N,K]; D and aux column-major, which is the same
//             memory as above), so that the bias gradient is per row of D: dbias[M] = the sum
//             over N of D's fp32 values. CUTLASS keeps one partial per tile in its workspace and
//             the last CTA of each row of tiles (an integer counter elects it) adds them in tile
//             order: no float atomics, the same bits every launch.
// GELU is GPT-2's tanh form, as runtime/cuda's kernels and cuBLASLt's epilogues; accumulation is
// fp32; no epilogue reduces across CTAs, so a product has the same bits every launch.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace railyard::bench {

// The last two are the residual forwards Y[M,C] = A W^T + bias + residual (C = 768 outputs; the
// attention projection's K = 768, fc2's K = 3072), timed with the engine's own CUTLASS class
// (runtime/cuda/residual_gemm_cutlass.hpp), not through this file's variants.
enum class GeluProduct {
  kForward,
  kBackward,
  kPlainForward,
  kPlainBackward,
  kBackwardBiasGrad,
  kAttnProjResidual,
  kFc2Residual,
};

struct GeluGemmOperands {
  int m = 0, n = 0, k = 0;
  const __nv_bfloat16* a = nullptr;  // [M,K]; backward + bias gradient: [K,M] (the weight)
  const __nv_bfloat16* b = nullptr;  // forward, backward + bias gradient: [N,K]; backward: [K,N]
  __nv_bfloat16* d = nullptr;
  const __nv_bfloat16* bias = nullptr;    // forward products: [N]
  __nv_bfloat16* aux_out = nullptr;       // forward with GELU: the value before GELU
  const __nv_bfloat16* aux_in = nullptr;  // backward with GELU: the forward's value before GELU
  float* dbias = nullptr;                 // backward + bias gradient: [M]
};

// One product's kernel, set up for fixed operands (workspace and TMA descriptors made once), so
// that run() costs only the launch (with the bias gradient, also the zeroing of its counters).
class GeluGemmLaunch {
 public:
  virtual ~GeluGemmLaunch() = default;
  virtual void run(cudaStream_t stream) = 0;
};

struct GeluGemmVariant {
  std::string name;  // tile, cluster and schedule, e.g. "cutlass 256x128x64 c2x1 coop"
  GeluProduct product;
  // Throws std::runtime_error naming the configuration where CUTLASS cannot run the operands.
  std::function<std::unique_ptr<GeluGemmLaunch>(const GeluGemmOperands&)> prepare;
};

std::vector<GeluGemmVariant> cutlass_forward_variants();
std::vector<GeluGemmVariant> cutlass_backward_variants();
std::vector<GeluGemmVariant> cutlass_backward_bias_grad_variants();
std::vector<GeluGemmVariant> cutlass_plain_variants();
std::string cutlass_version();  // of the headers the kernels were compiled with

}  // namespace railyard::bench
