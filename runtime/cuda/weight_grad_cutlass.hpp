#pragma once
// The layers' weight-gradient products, dW[O,I] (+)= dY[N,O]^T X[N,I] with fp32 dW over the
// N = B T positions, as CUTLASS Hopper kernels (issue 12). cuBLASLt's pinned kernels run them at
// 630-680 TFLOP/s against 700-730 for the step's products with 16384 rows: their outputs have
// only 36-168 tiles of 128 x 128 for 132 SMs (wave quantization), and with the ones column
// (ones_column_kernels.hpp) I = 776 is 6.06 such tiles. Two remedies to compare
// (bench/weight_grad_bench): CUTLASS's stream-K scheduler, which splits the positions (K) of
// some tiles between CTAs so that every SM gets the same share of the work, or split-K into a
// fixed number of parts; and tiles 112 wide, 7 of which cover 776 (784 columns computed).
//
// What it promises: bf16 operands, fp32 accumulation and output; beta 0 ("=") or 1 ("+=", dW
// read and written in place). The same bits every launch: a tile split over K is summed in a
// fixed order (the stream-K scheduler's ReductionMode::Deterministic: each part waits for the one
// before it), not cuBLASLt's order nor another variant's. Workspace: a variant that splits K
// needs workspace_bytes() of the caller's memory, its barriers (its last zeroed_tail_bytes() at
// most) zeroed before every launch by a cudaMemsetAsync on the call's stream (a graph node when
// captured); nothing reads its partial tiles before they are written. No allocation after
// construction: capturable in a CUDA graph once run() has run eagerly (its first call sets the
// kernel's shared-memory attribute). Built only where CMake found CUTLASS's headers
// (RAILYARD_HAVE_CUTLASS), for sm_90a alone: only on compute capability 9.0 (supports()). Refused
// with std::invalid_argument naming the operand at fault: N, I or O not positive; I or O not a
// multiple of 8 or ldx < I or not a multiple of 8 (16-byte rows for TMA); a pointer missing or not
// on 16 bytes; a workspace smaller than needed.

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dtype.hpp"

namespace railyard::cuda {

class CutlassWeightGrad {
 public:
  // Tile (M x N x K: dW's rows O x its columns I x positions), cluster, schedule, scheduler.
  enum class Tile {
    kCooperative128x128,  // 128x128x64, cluster 1x1, cooperative, stream-K scheduler
    kCooperative128x112,  // 128x112x64, cluster 1x1, cooperative, stream-K scheduler
    kPingpong128x112,     // 128x112x64, cluster 2x1, ping-pong, persistent (data-parallel only)
  };
  // How the stream-K scheduler shares the work: whole tiles (data-parallel), equal shares of all
  // tiles' K iterations (stream-K), or every tile in `splits` parts (split-K).
  enum class Split { kDataParallel, kStreamK, kSplitK };
  struct Variant {
    Tile tile;
    Split split;
    int splits = 1;  // kSplitK only: 2 or more
  };
  static std::string name(Variant v);
  // Every variant there is: each stream-K tile data-parallel, stream-K and split-K 2, 3 and 4;
  // the ping-pong tile data-parallel (the bench times them all, the GPU check checks them all).
  static std::vector<Variant> all_variants();
  // A short one for the engine's start line: "co128x112-dp", "co128x128-streamk",
  // "co128x128-splitk3", "pp128x112-dp".
  static std::string tag(Variant v);

  // Whether `device` can run the kernels: compute capability 9.0 (H100, H200, GH200).
  static bool supports(int device);

  // For the current device; throws std::runtime_error where supports() is false and
  // std::invalid_argument for a variant that does not exist (kPingpong128x112 that splits, a
  // split-K of fewer than 2 parts).
  explicit CutlassWeightGrad(Variant v);
  ~CutlassWeightGrad();
  CutlassWeightGrad(const CutlassWeightGrad&) = delete;
  CutlassWeightGrad& operator=(const CutlassWeightGrad&) = delete;

  Variant variant() const { return variant_; }
  // The bytes of workspace run() needs at this shape on this device (0: none), and how many of
  // its last bytes at most run() zeroes before the launch (the stream-K scheduler's barriers,
  // one flag per output tile and math warp group; TailZeroedWorkspaces lays workspaces out by
  // it so that a graph can zero them all at its head). The rest of the workspace (the split
  // tiles' partial sums) is written before it is read.
  size_t workspace_bytes(int N, int I, int O) const;
  size_t zeroed_tail_bytes(int N, int I, int O) const;

  // dw[O,I] = dy[N,O]^T x[N,I], or += where `accumulate`; dw and dy packed row-major, x's rows
  // ldx apart (the LayerNorm outputs with their ones column: 832 apart, I = 776 read).
  void run(float* dw, const bf16* dy, const bf16* x, int N, int I, int O, int ldx, bool accumulate,
           void* workspace, size_t workspace_bytes, cudaStream_t stream);

 private:
  struct Kernel;
  template <class G>
  struct KernelOf;
  std::unique_ptr<Kernel> kernel_;
  Variant variant_;
};

}  // namespace railyard::cuda
