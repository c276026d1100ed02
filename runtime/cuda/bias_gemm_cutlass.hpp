#pragma once
// The bias-only forwards, Y = X W^T + bias (the QKV projection's: 16384 x 2304 x 768 at GPT-2
// 124M, X = ln1 with its rows ln_ld_ = 776 elements apart), as one CUTLASS Hopper kernel: the
// bias added to the fp32 accumulator in the epilogue, the sum rounded once to bf16 (issue 12:
// cuBLASLt's pinned pick runs the QKV forward at 644 TFLOP/s against 688 at N = 3072, where
// CUTLASS's ping-pong kernel is level with it; bench/NOTES.md).
//
// What it promises: bf16 operands and output, fp32 accumulation; every output tile is one CTA's,
// summed in one order (no split-K, no stream-K), so a call gives the same bits every launch (not
// cuBLASLt's bits: another summation order). No workspace, no allocation after construction:
// capturable in a CUDA graph once run() has run eagerly (its first call sets the kernel's
// shared-memory attribute). Where it runs: built only where CMake found CUTLASS's headers
// (RAILYARD_HAVE_CUTLASS), compiled for sm_90a alone, so only on compute capability 9.0
// (supports()); the engine uses cuBLASLt's BIAS epilogue elsewhere. Operands it refuses with an
// error naming the one at fault: I or O not a multiple of 8, X's row stride below I or not a
// multiple of 8 elements, a pointer missing or not on 16 bytes (TMA's rules).

#include <cuda_runtime.h>

#include <memory>

#include "dtype.hpp"

namespace railyard::cuda {

class CutlassBiasForward {
 public:
  // Tile (M x N x K), cluster and schedule; the bench times each, the engine runs kEngineTile.
  enum class Tile {
    kPingpong128x128,     // 128x128x64, cluster 1x2, ping-pong warp groups
    kCooperative128x256,  // 128x256x64, cluster 2x1, cooperative
    kCooperative128x192,  // 128x192x64, cluster 1x2, cooperative (2304 = 12 x 192)
  };
  // The engine's choice (CUTLASS's best on every forward measured so far: bench/NOTES.md).
  static constexpr Tile kEngineTile = Tile::kPingpong128x128;
  static const char* name(Tile t);

  // Whether `device` can run the kernel: compute capability 9.0 (H100, H200, GH200).
  static bool supports(int device);

  // For the current device; throws std::runtime_error where supports() is false.
  explicit CutlassBiasForward(Tile tile = kEngineTile);
  ~CutlassBiasForward();
  CutlassBiasForward(const CutlassBiasForward&) = delete;
  CutlassBiasForward& operator=(const CutlassBiasForward&) = delete;

  // Y[N,O] = X[N,I] W[O,I]^T + bias[O] (fp32, rounded once); X's rows lie `ldx` elements apart
  // (>= I: padded rows allowed), W and Y are packed.
  void run(bf16* y, const bf16* x, int ldx, const bf16* w, const bf16* bias, int N, int I, int O,
           cudaStream_t stream);

 private:
  struct Kernel;
  template <class G>
  struct KernelOf;
  std::unique_ptr<Kernel> kernel_;
  Tile tile_;
};

}  // namespace railyard::cuda
