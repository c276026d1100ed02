#pragma once
// The MLP's two products with GELU fused, as CUTLASS Hopper kernels (issue 12): 128x128x64
// tiles, cluster 1x2, ping-pong warp groups (one group's epilogue overlaps the other's math).
//   forward   Y = GELU(X W^T + bias), the value before GELU kept for the backward: bias, GELU and
//             the aux store in the epilogue (137.6 us against cuBLASLt's GELU_AUX_BIAS 149.9 us
//             at GPT-2 124M's 16384 x 3072 x 768 on an H200, bench/NOTES.md);
//   backward  fc2's input gradient times GELU' of that value, read in the epilogue (145.1 us
//             against cuBLASLt's DGELU 142.9 us alone; chosen for the step, where the epilogue's
//             cold read of the value overlaps the next tile's math: bench/NOTES.md).
//
// What they promise: bf16 operands and outputs, fp32 accumulation, GPT-2's tanh GELU as
// cuBLASLt's epilogues compute it; every output tile is one CTA's, summed in one order (no
// split-K, no stream-K), so a call gives the same bits every launch (not cuBLASLt's bits: another
// summation order). No workspace, no allocation after construction: capturable in a CUDA graph
// once run() has run eagerly (its first call sets the kernel's shared-memory attribute).
// Where they run: built only where CMake found CUTLASS's headers (RAILYARD_HAVE_CUTLASS), compiled
// for sm_90a alone, so only on compute capability 9.0 (cutlass_sm90_supports()); the engine uses
// cuBLASLt's epilogues elsewhere. Operands they refuse with std::invalid_argument naming the one
// at fault: a feature count not a multiple of 8, a row stride below its row or not a multiple of
// 8 elements, a pointer null or not on 16 bytes (TMA's alignment rules).

#include <cuda_runtime.h>

#include <memory>

#include "dtype.hpp"

namespace railyard::cuda {

// Whether `device` can run these kernels: compute capability 9.0 (H100, H200, GH200).
bool cutlass_sm90_supports(int device);

class CutlassGeluForward {
 public:
  // For the current device; throws std::runtime_error where cutlass_sm90_supports() is false.
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

class CutlassGeluBackward {
 public:
  // For the current device; throws std::runtime_error where cutlass_sm90_supports() is false.
  CutlassGeluBackward();
  ~CutlassGeluBackward();
  CutlassGeluBackward(const CutlassGeluBackward&) = delete;
  CutlassGeluBackward& operator=(const CutlassGeluBackward&) = delete;

  // dX[N,I] = (dY[N,O] W[O,I]) * GELU'(pre[N,I]), as Matmul::linear_backward_input with
  // gelu_pre: W is the Linear weight [out O][in I] as stored (fc2's [C][4C]), pre the forward's
  // value before GELU; all packed.
  void run(bf16* dx, const bf16* dy, const bf16* w, const bf16* pre, int N, int I, int O,
           cudaStream_t stream);

 private:
  struct Kernel;
  std::unique_ptr<Kernel> kernel_;
};

}  // namespace railyard::cuda
