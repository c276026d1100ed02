#pragma once
// The residual forwards, Y = X W^T + bias + residual (the attention projection's and fc2's, with
// the incoming residual stream as the epilogue's C, beta 1), as one CUTLASS Hopper kernel: the
// bias and C added to the fp32 accumulator in the epilogue, C read by its TMA load, the sum
// rounded once to bf16 (issue 12: cuBLASLt's product at 16384 x 768 x 768 takes 40.5 us with C
// against 31.5 without on an H200; bench/NOTES.md).
//
// What it promises: bf16 operands and output, fp32 accumulation; every output tile is one CTA's,
// summed in one order (no split-K, no stream-K), so a call gives the same bits every launch (not
// cuBLASLt's bits: another summation order); the residual is only read. No workspace, no
// allocation after construction: capturable in a CUDA graph once run() has run eagerly (its first
// call sets the kernel's shared-memory attribute). Where it runs: built only where CMake found
// CUTLASS's headers (RAILYARD_HAVE_CUTLASS), compiled for sm_90a alone, so only on compute
// capability 9.0 (supports()); the engine uses cuBLASLt's residual product elsewhere. Operands it
// refuses with an error naming the one at fault: I or O not a multiple of 8, X's row stride below
// I or not a multiple of 8 elements, a pointer missing or not on 16 bytes (TMA's rules), the
// residual being Y itself.

#include <cuda_runtime.h>

#include <memory>

#include "dtype.hpp"

namespace railyard::cuda {

class CutlassResidualForward {
 public:
  // Tile (M x N x K), cluster and schedule; the bench times each, the engine runs kEngineTile.
  enum class Tile {
    kPingpong128x128,     // 128x128x64, cluster 1x2, ping-pong warp groups
    kCooperative256x128,  // 256x128x64, cluster 2x1, cooperative
    kCooperative128x256,  // 128x256x64, cluster 2x1, cooperative
  };
  // The engine's choice: the fastest at 16384 x 768 x 768 on an H200, 36.9-37.2 us against the
  // cooperative tiles' 41.3-41.6 and cuBLASLt's 40.1-40.3 (bench/NOTES.md, issue 12).
  static constexpr Tile kEngineTile = Tile::kPingpong128x128;
  static const char* name(Tile t);

  // Whether `device` can run the kernel: compute capability 9.0 (H100, H200, GH200).
  static bool supports(int device);

  // For the current device; throws std::runtime_error where supports() is false.
  explicit CutlassResidualForward(Tile tile = kEngineTile);
  ~CutlassResidualForward();
  CutlassResidualForward(const CutlassResidualForward&) = delete;
  CutlassResidualForward& operator=(const CutlassResidualForward&) = delete;

  // Y[N,O] = X[N,I] W[O,I]^T + bias[O] + residual[N,O] (fp32, rounded once); X's rows lie `ldx`
  // elements apart (>= I), W, Y and residual are packed; residual is another buffer than Y.
  void run(bf16* y, const bf16* x, int ldx, const bf16* w, const bf16* bias, const bf16* residual,
           int N, int I, int O, cudaStream_t stream);

 private:
  struct Kernel;
  template <class G>
  struct KernelOf;
  std::unique_ptr<Kernel> kernel_;
  Tile tile_;
};

}  // namespace railyard::cuda
