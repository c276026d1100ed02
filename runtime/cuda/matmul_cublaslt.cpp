#include "matmul_cublaslt.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace railyard::cuda {

struct Matmul::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = SIZE_MAX;  // what `algo` needs (SIZE_MAX: unknown, the shared workspace)
  ~Plan() {
    if (la != nullptr) cublasLtMatrixLayoutDestroy(la);
    if (lb != nullptr) cublasLtMatrixLayoutDestroy(lb);
    if (ld != nullptr) cublasLtMatrixLayoutDestroy(ld);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

namespace {

cublasLtMatrixLayout_t make_layout(cudaDataType_t t, int rows, int cols, int ld, int batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  RY_CUBLAS(cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows),
                                       static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    int32_t count = batch;
    RY_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                               sizeof(count)));
    RY_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &stride, sizeof(stride)));
  }
  return l;
}

// The epilogue of a call: bias, GELU forward (needs the bias), GELU backward (takes none).
cublasLtEpilogue_t epilogue_of(const GemmCall& c) {
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (c.gelu == GeluEpilogue::kForward) {
    if (c.bias == nullptr) throw std::logic_error("Matmul: the GELU forward epilogue needs a bias");
    epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  } else if (c.gelu == GeluEpilogue::kBackward) {
    if (c.bias != nullptr)
      throw std::logic_error("Matmul: the GELU backward epilogue takes no bias");
    epi = CUBLASLT_EPILOGUE_DGELU;
  } else if (c.bias != nullptr) {
    epi = CUBLASLT_EPILOGUE_BIAS;
  }
  return epi;
}

// X's rows ldx apart (0: packed) must hold its I columns.
void check_row_stride(int ldx, int I) {
  if (ldx != 0 && ldx < I) {
    throw std::invalid_argument("Matmul: input rows " + std::to_string(ldx) +
                                " apart, shorter than their " + std::to_string(I) + " columns");
  }
}

// A batch of weight gradients: at least one, their outputs apart.
void check_weight_grad_batch(const WeightGradBatch& b, int I, int O) {
  if (b.count < 1 || (b.count > 1 && b.dw < int64_t(I) * O)) {
    throw std::invalid_argument("Matmul: a batch of " + std::to_string(b.count) +
                                " weight gradients of " + std::to_string(O) + "x" +
                                std::to_string(I) + " needs at least one, each its own " +
                                "output (dW stride " + std::to_string(b.dw) + ")");
  }
}

}  // namespace

Matmul::Matmul(size_t workspace_bytes)
    : workspace_(workspace_bytes), slots_(kWorkspaceSlots ? kSlotArenaBytes : 0) {
  RY_CUBLAS(cublasLtCreate(&handle_));
  int dev = 0, major = 0, minor = 0;
  RY_CUDA(cudaGetDevice(&dev));
  RY_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  RY_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  sm_ = major * 10 + minor;
}

GemmPinKey Matmul::pin_key(const GemmCall& c) const {
  return {sm_,      cublasLtGetVersion(), c.trans_a,      c.trans_b, c.m, c.n, c.k, c.ab_type,
          c.d_type, epilogue_of(c),       c.beta != 0.0f, c.batch};
}

GemmAlgoConfig Matmul::algo_config(const GemmCall& c) {
  return algo_config_of(plan_for(c).algo);
}

Matmul::~Matmul() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

Matmul::Plan& Matmul::plan_for(const GemmCall& c) {
  Key key{c.trans_a,
          c.trans_b,
          c.m,
          c.n,
          c.k,
          c.lda,
          c.ldb,
          c.ldd,
          static_cast<int>(c.ab_type),
          static_cast<int>(c.d_type),
          c.batch,
          c.bias != nullptr,
          c.beta != 0.0f,
          static_cast<int>(c.gelu),
          c.stride_a,
          c.stride_b,
          c.stride_d};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto p = std::make_unique<Plan>();
  RY_CUBLAS(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  RY_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  RY_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  const cublasLtEpilogue_t epi = epilogue_of(c);
  RY_CUBLAS(
      cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  if (c.gelu != GeluEpilogue::kNone) {
    int64_t ld = c.ldd;
    RY_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
                                             sizeof(ld)));
    // The heuristic reads the pointer for its alignment; each call sets the real one.
    RY_CUBLAS(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                             &c.aux, sizeof(c.aux)));
  }
  p->la = make_layout(c.ab_type, c.trans_a ? c.k : c.m, c.trans_a ? c.m : c.k, c.lda, c.batch,
                      c.stride_a);
  p->lb = make_layout(c.ab_type, c.trans_b ? c.n : c.k, c.trans_b ? c.k : c.n, c.ldb, c.batch,
                      c.stride_b);
  p->ld = make_layout(c.d_type, c.m, c.n, c.ldd, c.batch, c.stride_d);

  p->algo = choose_algo(*p, c);
  p->workspace = workspace_needed(*p);
  return *plans_.emplace(key, std::move(p)).first->second;
}

std::vector<cublasLtMatmulHeuristicResult_t> Matmul::heuristic(const Plan& p, const GemmCall& c,
                                                               int count) const {
  cublasLtMatmulPreference_t pref = nullptr;
  RY_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                  decltype(&cublasLtMatmulPreferenceDestroy)>
      owned(pref, &cublasLtMatmulPreferenceDestroy);
  uint64_t ws = workspace_.bytes();
  RY_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof(ws)));
  // Every operand the engine passes starts on at least a 16-byte boundary (ParamLayout::kAlign).
  uint32_t align = 16;
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    RY_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  }
  // Split-K "in place" reductions add the parts in the output in whatever order they finish;
  // the other schemes reduce in a fixed order, so every product has the same bits every run.
  uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  RY_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &schemes, sizeof(schemes)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.la, p.lb, p.ld, p.ld, pref,
                                                     count, results.data(), &found);
  results.resize(st == CUBLAS_STATUS_SUCCESS ? static_cast<size_t>(found) : 0);
  std::erase_if(results, [](const auto& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
  if (results.empty()) {
    throw std::runtime_error("cuBLASLt found no algorithm for a " + std::to_string(c.m) + "x" +
                             std::to_string(c.n) + "x" + std::to_string(c.k) + " product (batch " +
                             std::to_string(c.batch) + "): " + cublasLtGetStatusName(st));
  }
  return results;
}

// The pinned algorithm where the table names one: as the heuristic offers it where it does
// (the algorithm exactly as the survey ran it), else set up from its configuration, which the
// survey may have found by enumerating configurations; the heuristic's first where neither works
// (another GPU or cuBLASLt).
cublasLtMatmulAlgo_t Matmul::choose_algo(const Plan& p, const GemmCall& c) const {
  const auto pin = pinned_algo(pin_key(c));
  const auto found = heuristic(p, c, pin ? kPinCandidates : 1);
  if (!pin) return found.front().algo;
  std::vector<GemmAlgoConfig> configs;
  for (const auto& r : found) configs.push_back(algo_config_of(r.algo));
  if (const auto i = find_pinned(configs, *pin)) return found[*i].algo;
  if (const auto set = check_config(p, c, *pin)) return set->algo;
  return found.front().algo;
}

std::optional<cublasLtMatmulHeuristicResult_t> Matmul::check_config(
    const Plan& p, const GemmCall& c, const GemmAlgoConfig& config) const {
  if (!fixed_order(config)) return std::nullopt;
  cublasLtMatmulHeuristicResult_t r{};
  if (algo_of_config(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, c.ab_type, c.d_type, config,
                     &r.algo) != CUBLAS_STATUS_SUCCESS ||
      cublasLtMatmulAlgoCheck(handle_, p.op, p.la, p.lb, p.ld, p.ld, &r.algo, &r) !=
          CUBLAS_STATUS_SUCCESS ||
      r.workspaceSize > workspace_.bytes()) {
    return std::nullopt;
  }
  r.state = CUBLAS_STATUS_SUCCESS;
  return r;
}

std::vector<GemmAlgoCaps> Matmul::algo_caps(const GemmCall& c) const {
  return railyard::cuda::algo_caps(handle_, CUBLAS_COMPUTE_32F, CUDA_R_32F, c.ab_type, c.d_type);
}

std::optional<cublasLtMatmulHeuristicResult_t> Matmul::checked(const GemmCall& c,
                                                               const GemmAlgoConfig& config) {
  return check_config(plan_for(c), c, config);
}

std::vector<cublasLtMatmulHeuristicResult_t> Matmul::candidates(const GemmCall& c, int count) {
  return heuristic(plan_for(c), c, count);
}

size_t Matmul::workspace_needed(const Plan& p) const {
  cublasLtMatmulHeuristicResult_t r{};
  if (cublasLtMatmulAlgoCheck(handle_, p.op, p.la, p.lb, p.ld, p.ld, &p.algo, &r) !=
      CUBLAS_STATUS_SUCCESS) {
    return SIZE_MAX;
  }
  return r.workspaceSize;
}

Matmul::Workspace Matmul::workspace_for(const Plan& p, cudaStream_t stream) {
  const Workspace shared{workspace_.as<void>(), workspace_.bytes()};
  if (slots_.bytes() == 0 || p.workspace > kMaxSlotWorkspace) return shared;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  RY_CUDA(cudaStreamGetCaptureInfo(stream, &status, &id));
  if (status != cudaStreamCaptureStatusActive) return shared;
  if (id != capture_id_) {  // a new capture: a new graph, whose products may take any slot
    capture_id_ = id;
    slots_used_ = 0;
  }
  const size_t bytes =
      (std::max<size_t>(p.workspace, 1) + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
  if (bytes > slots_.bytes() - slots_used_) {
    if (!slots_full_logged_) {
      std::fprintf(stderr,
                   "railyard: warning: more products in one CUDA graph than cuBLASLt workspace "
                   "slots (%zu bytes): the rest keep their memsets (same results, slower)\n",
                   slots_.bytes());
      slots_full_logged_ = true;
    }
    return shared;
  }
  const Workspace slot{slots_.as<char>(slots_used_), bytes};
  slots_used_ += bytes;
  return slot;
}

void Matmul::gemm(const GemmCall& c, cudaStream_t stream) {
  Plan& p = plan_for(c);
  launch(c, p, p.algo, workspace_for(p, stream), stream);
}

void Matmul::gemm_with(const GemmCall& c, const cublasLtMatmulAlgo_t& algo, cudaStream_t stream) {
  launch(c, plan_for(c), algo, {workspace_.as<void>(), workspace_.bytes()}, stream);
}

void Matmul::launch(const GemmCall& c, Plan& p, const cublasLtMatmulAlgo_t& algo,
                    const Workspace& ws, cudaStream_t stream) {
  if (c.bias != nullptr) {
    RY_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias,
                                             sizeof(c.bias)));
  }
  if (c.gelu != GeluEpilogue::kNone) {
    RY_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                             &c.aux, sizeof(c.aux)));
  }
  // C another buffer than D (out of place) is laid out as D: D's layout descriptor serves both.
  const void* in = c.c_in != nullptr ? c.c_in : c.d;
  RY_CUBLAS(cublasLtMatmul(handle_, p.op, &c.alpha, c.a, p.la, c.b, p.lb, &c.beta, in, p.ld, c.d,
                           p.ld, &algo, ws.ptr, ws.bytes, stream));
}

// Row-major M[r, c] is column-major M^T with leading dimension c; each product below is the
// transposed identity of the row-major one it computes.
void Matmul::linear_forward(void* y, const void* x, const void* w, const void* bias, int N, int I,
                            int O, cudaDataType_t t, cudaStream_t stream, void* gelu_pre, int ldx,
                            const void* residual) {
  gemm(forward_call(y, x, w, bias, N, I, O, t, gelu_pre, ldx, residual), stream);
}

GemmCall Matmul::forward_call(void* y, const void* x, const void* w, const void* bias, int N, int I,
                              int O, cudaDataType_t t, void* gelu_pre, int ldx,
                              const void* residual) {
  check_row_stride(ldx, I);
  if (residual != nullptr && (residual == y || gelu_pre != nullptr)) {
    throw std::logic_error(
        "Matmul: a forward's residual input must be another buffer than its "
        "output, and goes with no GELU epilogue");
  }
  GemmCall c;  // Y^T[O,N] = W[O,I] X^T[I,N]
  c.trans_a = true;
  c.m = O, c.n = N, c.k = I;
  c.a = w, c.lda = I;
  c.b = x, c.ldb = ldx > 0 ? ldx : I;
  c.d = y, c.ldd = O;
  c.ab_type = t, c.d_type = t;
  c.bias = bias;
  if (residual != nullptr) {  // D = W X^T + bias + residual^T, residual laid out as Y
    c.c_in = residual;
    c.beta = 1.0f;
  }
  if (gelu_pre != nullptr) {
    c.gelu = GeluEpilogue::kForward;
    c.aux = gelu_pre;
  }
  return c;
}

void Matmul::linear_backward_input(void* dx, const void* dy, const void* w, int N, int I, int O,
                                   cudaDataType_t t, bool accumulate, cudaStream_t stream,
                                   const void* gelu_pre) {
  gemm(backward_input_call(dx, dy, w, N, I, O, t, accumulate, gelu_pre), stream);
}

GemmCall Matmul::backward_input_call(void* dx, const void* dy, const void* w, int N, int I, int O,
                                     cudaDataType_t t, bool accumulate, const void* gelu_pre) {
  GemmCall c;  // dX^T[I,N] = W^T[I,O] dY^T[O,N]
  c.m = I, c.n = N, c.k = O;
  c.a = w, c.lda = I;
  c.b = dy, c.ldb = O;
  c.d = dx, c.ldd = I;
  c.ab_type = t, c.d_type = t;
  c.beta = accumulate ? 1.0f : 0.0f;
  if (gelu_pre != nullptr) {
    if (accumulate) throw std::logic_error("Matmul: the GELU backward epilogue cannot accumulate");
    c.gelu = GeluEpilogue::kBackward;
    c.aux = gelu_pre;
  }
  return c;
}

void Matmul::linear_backward_weight(float* dw, const void* dy, const void* x, int N, int I, int O,
                                    cudaDataType_t t, bool accumulate, cudaStream_t stream, int ldx,
                                    const WeightGradBatch& batch) {
  gemm(backward_weight_call(dw, dy, x, N, I, O, t, accumulate, ldx, batch), stream);
}

GemmCall Matmul::backward_weight_call(float* dw, const void* dy, const void* x, int N, int I, int O,
                                      cudaDataType_t t, bool accumulate, int ldx,
                                      const WeightGradBatch& batch) {
  check_row_stride(ldx, I);
  check_weight_grad_batch(batch, I, O);
  GemmCall c;  // dW^T[I,O] (+)= X^T[I,N] dY[N,O]
  c.trans_b = true;
  c.m = I, c.n = O, c.k = N;
  c.a = x, c.lda = ldx > 0 ? ldx : I;
  c.b = dy, c.ldb = O;
  c.d = dw, c.ldd = I;
  c.ab_type = t, c.d_type = CUDA_R_32F;
  c.beta = accumulate ? 1.0f : 0.0f;
  if (batch.count > 1) {  // column-major: A is X^T, B is dY^T, D is dW^T, each at its stride
    c.batch = batch.count;
    c.stride_a = batch.x, c.stride_b = batch.dy, c.stride_d = batch.dw;
  }
  return c;
}

}  // namespace railyard::cuda
