#pragma once
// Matrix products through cuBLASLt, fp32 accumulation always. Operands are row-major as in the
// model ([rows, cols], Linear weights [out, in]); the column-major translation happens inside.
// Plans (descriptors and the chosen algorithm) are cached per shape, so steady-state calls
// cost only the launch. The algorithm is the heuristic's first, or the one gemm_pins.hpp's fixed
// table pins for the product on this GPU and cuBLASLt where that configuration initialises and
// passes cublasLtMatmulAlgoCheck for the product's descriptors. Split-K
// reductions are limited to fixed-order schemes and the workspace is fixed, so a product gives the
// same bits every run on the same GPU and library.

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "device_buffer.hpp"
#include "gemm_algo_config.hpp"
#include "gemm_config_space.hpp"
#include "gemm_pins.hpp"

namespace railyard::cuda {

// Workspace slots (issue 12). Inside a stream capture, a product whose algorithm needs at most
// Matmul::kMaxSlotWorkspace bytes of workspace gets its own slot of a small arena (its need
// rounded up to 256 bytes) instead of the shared workspace; each capture hands the slots out
// afresh, so within one graph no two products share a slot. The memset cuBLASLt issues before
// such a product (the nvjet products' tile counter) then writes bytes that no other node of the
// graph touches, which lets StepGraphs zero them all once at the graph's head
// (hoist_scratch_memsets in graph_memsets.hpp, given slot_arena()). Eager calls, products that
// need more (split-K partials) and calls past the arena's end use the shared workspace, their
// memsets in place. The algorithm is the same either way, so are the bits.
// false (the A/B switch): every product uses the shared workspace, slot_arena() is empty.
inline constexpr bool kWorkspaceSlots = true;

// One column-major product D = alpha * op(A) op(B) + beta * C, optionally batched with
// strides, with an optional bias (length m, D's type) added in the epilogue. C is D itself
// unless `c_in` names another matrix laid out as D (a residual input: D = A B + bias + C, its sum
// rounded once; C's values must not overlap D's).
// GPT-2's GELU (the tanh form) in the epilogue: forward writes GELU(x) to D and x to `aux`;
// backward multiplies the product by GELU'(aux).
enum class GeluEpilogue { kNone, kForward, kBackward };

struct GemmCall {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int lda = 0;
  const void* b = nullptr;
  int ldb = 0;
  void* d = nullptr;
  int ldd = 0;
  const void* c_in = nullptr;  // C; null: C is D (beta scales what D held)
  cudaDataType_t ab_type = CUDA_R_32F;
  cudaDataType_t d_type = CUDA_R_32F;
  float alpha = 1.0f, beta = 0.0f;
  const void* bias = nullptr;
  GeluEpilogue gelu = GeluEpilogue::kNone;
  const void* aux = nullptr;  // the GELU input, laid out as D (leading dimension ldd)
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
};

// A strided batch of backward-weight products (Matmul::linear_backward_weight): `count` of them
// in one launch, the i-th's dW, dY and X i times these strides (elements) past the first's.
// One product of `count` times the tiles: where one alone has too few tiles for the GPU, cuBLASLt
// need not split its K (no split-K partials, no reduction kernel).
struct WeightGradBatch {
  int count = 1;
  int64_t dw = 0, dy = 0, x = 0;
};

class Matmul {
 public:
  explicit Matmul(size_t workspace_bytes = 64u << 20);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  void gemm(const GemmCall& c, cudaStream_t stream);

  // For benches that survey algorithms (bench/gemm_step_survey.cpp): up to `count` of the
  // heuristic's candidates for `c`, best first, asked exactly as gemm() asks for its one (same
  // descriptors, preferences, fixed-order reductions only, this workspace); and `c` run with
  // one of them instead of the plan's own.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(const GemmCall& c, int count);
  void gemm_with(const GemmCall& c, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream);
  // What every algorithm cuBLASLt has for `c`'s types can do (gemm_config_space.hpp), and the
  // algorithm `config` names for `c` where it initialises, passes cublasLtMatmulAlgoCheck, adds
  // split-K parts in a fixed order and fits this workspace; none otherwise.
  std::vector<GemmAlgoCaps> algo_caps(const GemmCall& c) const;
  std::optional<cublasLtMatmulHeuristicResult_t> checked(const GemmCall& c,
                                                         const GemmAlgoConfig& config);
  size_t workspace_bytes() const { return workspace_.bytes(); }

  // The slots' arena (empty without kWorkspaceSlots). Promises, for a graph captured from calls
  // of this Matmul (StepGraphs passes it on to hoist_scratch_memsets): nothing reads what the
  // arena held before, each slot is used by one product, first by its memset where it has one.
  // Nothing outside the graph uses the arena while it runs as long as graphs of this Matmul run
  // one at a time (the engine's: all on its one stream).
  const void* slot_arena() const { return slots_.as<void>(); }
  size_t slot_arena_bytes() const { return slots_.bytes(); }

  // The product's key in the pin table on this GPU and cuBLASLt, and the algorithm gemm() runs
  // for it (tests/gpu checks a pinned product is the pin and still right).
  GemmPinKey pin_key(const GemmCall& c) const;
  GemmAlgoConfig algo_config(const GemmCall& c);

  // The GemmCall each linear_* below issues (pointers included), for the same benches.
  static GemmCall forward_call(void* y, const void* x, const void* w, const void* bias, int N,
                               int I, int O, cudaDataType_t t, void* gelu_pre = nullptr,
                               int ldx = 0, const void* residual = nullptr);
  static GemmCall backward_input_call(void* dx, const void* dy, const void* w, int N, int I, int O,
                                      cudaDataType_t t, bool accumulate,
                                      const void* gelu_pre = nullptr);
  static GemmCall backward_weight_call(float* dw, const void* dy, const void* x, int N, int I,
                                       int O, cudaDataType_t t, bool accumulate, int ldx = 0,
                                       const WeightGradBatch& batch = {});

  // Y[N,O] = X[N,I] W[O,I]^T (+ bias[O]) (+ residual[N,O]); X, W, Y, bias, residual of type
  // `t`. With gelu_pre, Y is GELU of that and gelu_pre [N,O] receives the value before GELU
  // (bias required, no residual). X's rows are ldx apart where ldx > 0 (at least I: a LayerNorm
  // output with its ones column, ones_column_kernels.hpp), I apart otherwise. With residual
  // (laid out as Y, another buffer), the residual add is in the epilogue (beta 1), the sum in
  // fp32 rounded once to `t`: a product of its own in the pin table (beta_nonzero).
  void linear_forward(void* y, const void* x, const void* w, const void* bias, int N, int I, int O,
                      cudaDataType_t t, cudaStream_t stream, void* gelu_pre = nullptr, int ldx = 0,
                      const void* residual = nullptr);
  // dX[N,I] (= or +=, per `accumulate`) dY[N,O] W[O,I]. With gelu_pre (the forward's value
  // before GELU, [N,I]), dX is multiplied by GELU'(gelu_pre); not with accumulate.
  void linear_backward_input(void* dx, const void* dy, const void* w, int N, int I, int O,
                             cudaDataType_t t, bool accumulate, cudaStream_t stream,
                             const void* gelu_pre = nullptr);
  // dW[O,I] (fp32) (+= with accumulate, else =) dY[N,O]^T X[N,I]; X's rows ldx apart where
  // ldx > 0 (at least I), I apart otherwise. With batch.count > 1, that many such products at
  // the batch's strides (the dW strides at least O I: no two products write one element).
  void linear_backward_weight(float* dw, const void* dy, const void* x, int N, int I, int O,
                              cudaDataType_t t, bool accumulate, cudaStream_t stream, int ldx = 0,
                              const WeightGradBatch& batch = {});

 private:
  struct Plan;
  static constexpr int kPinCandidates = 32;  // how deep a pinned algorithm is looked for
  static constexpr size_t kMaxSlotWorkspace = 4096, kSlotAlign = 256;
  static constexpr size_t kSlotArenaBytes = size_t(4) << 20;  // 1024 slots of 4 KiB at least
  struct Workspace {
    void* ptr;
    size_t bytes;
  };
  using Key = std::tuple<bool, bool, int, int, int, int, int, int, int, int, int, bool, bool, int,
                         int64_t, int64_t, int64_t>;
  Plan& plan_for(const GemmCall& c);
  std::vector<cublasLtMatmulHeuristicResult_t> heuristic(const Plan& p, const GemmCall& c,
                                                         int count) const;
  cublasLtMatmulAlgo_t choose_algo(const Plan& p, const GemmCall& c) const;
  std::optional<cublasLtMatmulHeuristicResult_t> check_config(const Plan& p, const GemmCall& c,
                                                              const GemmAlgoConfig& config) const;
  size_t workspace_needed(const Plan& p) const;
  // The workspace for p's own algorithm on `stream`: a slot while `stream` captures and one is
  // left and big enough, else the shared one.
  Workspace workspace_for(const Plan& p, cudaStream_t stream);
  void launch(const GemmCall& c, Plan& p, const cublasLtMatmulAlgo_t& algo, const Workspace& ws,
              cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  int sm_ = 0;  // compute capability of the current device, major * 10 + minor
  DeviceBuffer workspace_;
  DeviceBuffer slots_;
  unsigned long long capture_id_ = 0;  // the capture whose products hold the first slots_used_
  size_t slots_used_ = 0;              // bytes of slots_
  bool slots_full_logged_ = false;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace railyard::cuda
