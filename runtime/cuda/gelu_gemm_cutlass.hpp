#pragma once
// The MLP's fc forward, Y = GELU(X W^T + bias) with the value before GELU kept for the backward,
// as one CUTLASS Hopper kernel: 128x128x64 tiles, cluster 1x2, ping-pong warp groups, bias, GELU
// and the aux store fused in the epilogue (issue 12; 137.6 us against cuBLASLt's GELU_AUX_BIAS
// 149.9 us at GPT-2 124M's 16384 x 3072 x 768 on an H200, bench/NOTES.md).
//
// What it promises: bf16 operands and outputs, fp32 accumulation, GPT-2's tanh GELU as
// cuBLASLt's epilogue computes it; every output tile is one CTA's, summed in one order (no
// split-K, no stream-K), so a call gives the same bits every launch (not cuBLASLt's bits: another
// summation order). No workspace, no allocation after construction: capturable in a CUDA graph
// once run() has run eagerly (its first call sets the kernel's shared-memory attribute).
// Where it runs: built only where CMake found CUTLASS's headers (RAILYARD_HAVE_CUTLASS), compiled
// for sm_90a alone, so only on compute capability 9.0 (supports()); the engine uses cuBLASLt's
// GELU_AUX_BIAS elsewhere. Operands it refuses with an error naming the one at fault: I or O not
// a multiple of 8, X's row stride below I or not a multiple of 8 elements, a pointer not on 16
// bytes (TMA's alignment rules).

#include <cuda_runtime.h>

#include <memory>

#include "dtype.hpp"

namespace railyard::cuda {

class CutlassGeluForward {
 public:
  // Whether `device` can run the kernel: compute capability 9.0 (H100, H200, GH200).
  static bool supports(int device);

  // For the current device; throws std::runtime_error where supports() is false.
  CutlassGeluForward();
  ~CutlassGeluForward();
  CutlassGeluForward(const CutlassGeluForward&) = delete;
  CutlassGeluForward& operator=(const CutlassGeluForward&) = delete;

  // Y[N,O] = GELU(X[N,I] W[O,I]^T + bias[O]) and pre[N,O] = X W^T + bias (rounded to bf16);
  // X's rows lie `ldx` elements apart (>= I: padded rows allowed), W, Y and pre are packed.
  void run(bf16* y, bf16* pre, const bf16* x, int ldx, const bf16* w, const bf16* bias, int N,
           int I, int O, cudaStream_t stream);

 private:
  struct Kernel;
  std::unique_ptr<Kernel> kernel_;
};

}  // namespace railyard::cuda
