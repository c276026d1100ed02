#pragma once
// The LM head's weight gradient, dW[O,I] (+)= dY[N,O]^T X[N,I] with fp32 dW, as one CUTLASS
// Hopper kernel (issue 12). The head runs in chunks of N positions, so the tied wte's gradient
// is "=" for the first chunk and "+=" for the others; cuBLASLt's "+=" reads C in an epilogue
// that does not overlap its main loop: 452 us a chunk in the step against 408 for "=" (154 MB of
// fp32 read, once a chunk after the first). CUTLASS's ping-pong schedule runs one warp group's
// epilogue (the C load by TMA, the add, the store) under the other's products.
//
// What it promises: bf16 operands, fp32 accumulation and output; with `accumulate` the fp32 sum
// acc + dW rounded once (dW is read and written in place, C = D); every output tile is one CTA's,
// summed in one order (no split-K, no stream-K), so a call gives the same bits every launch (at
// GPT-2's head chunk of 4096 positions the same as cuBLASLt's too, measured: both add K in one
// order in fp32; not promised for other shapes or libraries). No workspace, no allocation after
// construction: capturable in a CUDA graph once run() has run eagerly (its first call sets the
// kernel's shared-memory attribute). Where it runs: built only where CMake found CUTLASS's headers
// (RAILYARD_HAVE_CUTLASS), compiled for sm_90a alone, so only on compute capability 9.0
// (supports()). Operands it refuses with an error naming the one at fault: N, I or O not
// positive, I or O not a multiple of 8 (16-byte rows of dY and X for TMA), a pointer missing or
// not on 16 bytes.

#include <cuda_runtime.h>

#include <memory>

#include "dtype.hpp"

namespace railyard::cuda {

class CutlassHeadWeightGrad {
 public:
  // Tile (M x N x K: vocabulary x model width x positions), cluster and schedule; the bench
  // times each, the engine runs kEngineTile.
  enum class Tile {
    kPingpong128x128,     // 128x128x64, cluster 1x2, ping-pong warp groups
    kCooperative256x128,  // 256x128x64, cluster 2x1, cooperative
    kCooperative128x256,  // 128x256x64, cluster 2x1, cooperative
  };
  static constexpr Tile kEngineTile = Tile::kPingpong128x128;
  static const char* name(Tile t);

  // Whether `device` can run the kernel: compute capability 9.0 (H100, H200, GH200).
  static bool supports(int device);

  // For the current device; throws std::runtime_error where supports() is false.
  explicit CutlassHeadWeightGrad(Tile tile = kEngineTile);
  ~CutlassHeadWeightGrad();
  CutlassHeadWeightGrad(const CutlassHeadWeightGrad&) = delete;
  CutlassHeadWeightGrad& operator=(const CutlassHeadWeightGrad&) = delete;

  // dw[O,I] = dy[N,O]^T x[N,I], or += where `accumulate`; all three packed row-major.
  void run(float* dw, const bf16* dy, const bf16* x, int N, int I, int O, bool accumulate,
           cudaStream_t stream);

 private:
  struct Kernel;
  template <class G>
  struct KernelOf;
  std::unique_ptr<Kernel> kernel_;
  Tile tile_;
};

}  // namespace railyard::cuda
