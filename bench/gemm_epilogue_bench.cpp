// The MLP's GELU products at GPT-2 124M's shapes, each way cuBLASLt (and our own kernels) can
// compute them, timed side by side in one call (bench/NOTES.md, issue 12): which path should the
// engine take for the fc layer's forward (GELU_AUX_BIAS today) and the backward into it (DGELU
// today, then the bias gradient's two-pass kernel)?
//   backward  dX[N, 4C] = (dY[N, C] W_proj[C, 4C]) * GELU'(pre), db_fc = column sums of dX
//   forward   Y[N, 4C] = GELU(pre), pre = X[N, C] W_fc[4C, C]^T + b_fc
// For every variant: median and minimum of --reps timed calls (cudaEvents, after --warmup), the
// outputs of three further runs compared bit for bit, the output's and the bias gradient's largest
// difference against today's path (bias gradient: runtime/cuda's bias_grad kernel), and for each
// single cuBLASLt call the algorithm its heuristic picked (id, tile, stages, split-K, reduction).
// Epilogues cuBLASLt does not offer for these shapes are reported as "not offered".
//
//   gemm_epilogue_bench [--batch 16 --seq 1024 --dim 768] [--warmup 10 --reps 50]
//                       [--candidates 4] [--once] [--json FILE]
// --once runs each variant once after an empty marker kernel (for ncu: the kernel list is cut at
// the markers, in the order of "variants" in the JSON) and checks nothing.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_args.hpp"
#include "bias_grad_kernels.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "dtype.hpp"
#include "event_timing.hpp"
#include "fixed_order_sum.hpp"
#include "gelu_kernels.hpp"
#include "gemm_algo_json.hpp"
#include "gemm_epilogue_kernels.hpp"
#include "matmul_cublaslt.hpp"
#include "railyard/splitmix64.hpp"

using railyard::cuda::bf16;
using railyard::cuda::DeviceBuffer;
using railyard::cuda::Matmul;
using json = nlohmann::json;
using railyard::bench::describe;
using railyard::bench::write_json;

namespace {

constexpr const char* kUsage =
    "usage: gemm_epilogue_bench [--batch 16 --seq 1024 --dim 768] [--warmup 10 --reps 50]\n"
    "                           [--candidates 4] [--once] [--json FILE]\n"
    "Times the MLP's GELU products (backward DGELU / DGELU_BGRAD / plain + kernels, forward\n"
    "GELU_AUX_BIAS / BIAS + kernel) and the heuristic's other candidates; checks same bits over\n"
    "three runs and the difference to today's path. --once: one run each behind a marker kernel.\n";

struct Options {
  int batch = 16, seq = 1024, dim = 768;
  int warmup = 10, reps = 50, candidates = 4;
  bool once = false;
  std::string json;
};

int positive(const std::string& flag, const char* value) {
  return railyard::bench::positive(flag, value, 1 << 20);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value\n" + kUsage);
      return argv[++i];
    };
    if (a == "--batch")
      o.batch = positive(a, next());
    else if (a == "--seq")
      o.seq = positive(a, next());
    else if (a == "--dim")
      o.dim = positive(a, next());
    else if (a == "--warmup")
      o.warmup = positive(a, next());
    else if (a == "--reps")
      o.reps = positive(a, next());
    else if (a == "--candidates")
      o.candidates = positive(a, next());
    else if (a == "--once")
      o.once = true;
    else if (a == "--json")
      o.json = next();
    else
      throw std::invalid_argument("unknown option " + a + "\n" + kUsage);
  }
  if (o.candidates > 32) {
    throw std::invalid_argument("--candidates " + std::to_string(o.candidates) +
                                ": at most 32 (each one is timed)");
  }
  if (int64_t(o.batch) * o.seq * 4 * o.dim > (int64_t(1) << 31)) {
    throw std::invalid_argument("--batch " + std::to_string(o.batch) + " --seq " +
                                std::to_string(o.seq) + " --dim " + std::to_string(o.dim) +
                                ": more than 2^31 hidden activations; use smaller shapes");
  }
  if (o.dim % 8 != 0) {
    throw std::invalid_argument("--dim " + std::to_string(o.dim) +
                                ": must be a multiple of 8 (16-byte rows of bf16)");
  }
  return o;
}

// ---- data ----------------------------------------------------------------------------------

// Uniform in [-scale, scale], from splitmix64 so every run and machine gets the same inputs.
DeviceBuffer random_bf16(size_t n, float scale, uint64_t seed) {
  std::vector<bf16> h(n);
  for (size_t i = 0; i < n; ++i) {
    const double u = double(railyard::splitmix64(seed * 0x100000000ULL + i) >> 11) * 0x1p-53;
    h[i] = __float2bfloat16(static_cast<float>((2 * u - 1) * scale));
  }
  DeviceBuffer d(n * sizeof(bf16));
  RY_CUDA(cudaMemcpy(d.as<void>(), h.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

std::vector<unsigned char> download(const void* p, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  RY_CUDA(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  return h;
}

// Device values of type `t` (bf16 or fp32) as floats.
std::vector<float> download_floats(const void* p, size_t n, cudaDataType_t t) {
  const auto raw = download(p, n * (t == CUDA_R_16BF ? sizeof(bf16) : sizeof(float)));
  std::vector<float> out(n);
  if (t == CUDA_R_16BF) {
    const auto* b = reinterpret_cast<const bf16*>(raw.data());
    for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(b[i]);
  } else {
    std::memcpy(out.data(), raw.data(), n * sizeof(float));
  }
  return out;
}

// max |a - ref| / max |ref|: a norm-wise relative difference (column sums of random signs
// can be near zero, where an element-wise one means nothing); infinite where a value is not
// finite.
double relative_difference(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(double(a[i]) - double(ref[i]));
    if (!std::isfinite(e)) return INFINITY;
    diff = std::max(diff, e);
    scale = std::max(scale, std::fabs(double(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// ---- cuBLASLt algorithm descriptions ---------------------------------------------------------

std::string algo_line(const json& a) {
  if (a.is_null()) return "";
  char s[256];
  std::snprintf(s, sizeof s,
                "algo %d tile %d stages %d splitK %d reduction %s swizzle %d custom %d inner %d "
                "cluster %d ws %zu waves %.2f",
                a["algo_id"].get<int>(), a["tile_id"].get<int>(), a["stages_id"].get<int>(),
                a["splitk"].get<int>(), a["reduction"].get<std::string>().c_str(),
                a["swizzle"].get<int>(), a["custom_option"].get<int>(),
                a["inner_shape_id"].get<int>(), a["cluster_shape_id"].get<int>(),
                a["workspace_bytes"].get<size_t>(), a["waves"].get<double>());
  return s;
}

// ---- one cuBLASLt product with a chosen epilogue ---------------------------------------------

// Column-major, as runtime/cuda/matmul_cublaslt.cpp lays the model's row-major operands out.
struct LtSpec {
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool trans_a = false;
  int m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0;
  const void* aux = nullptr;   // the GELU input (laid out as D), for GELU_AUX_* and DGELU*
  const void* bias = nullptr;  // bias (BIAS epilogues) or bias gradient (BGRAD), length m
  int bias_type = -1;          // a cudaDataType_t; -1: cuBLASLt's default, D's type
};

// Descriptors and the heuristic's candidates under Matmul's preferences (16-byte alignment,
// its workspace size, fixed-order split-K reductions), so the first candidate is what the
// engine would run for the same epilogue.
class LtProduct {
 public:
  LtProduct(cublasLtHandle_t handle, const LtSpec& spec) : handle_(handle) {
    try {
      describe_product(spec);
    } catch (...) {
      release();  // the destructor does not run for a constructor that throws
      throw;
    }
  }
  ~LtProduct() { release(); }
  LtProduct(const LtProduct&) = delete;
  LtProduct& operator=(const LtProduct&) = delete;

  // Up to `count` candidates, best first; none (and `why` says so) where cuBLASLt offers none.
  // fixed_order: split-K only with fixed-order reductions, as Matmul asks.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(int count, size_t workspace,
                                                          bool fixed_order, std::string& why) const;
  void run(const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, void* d,
           const DeviceBuffer& workspace, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    RY_CUBLAS(cublasLtMatmul(handle_, op_, &alpha, a, la_, b, lb_, &beta, d, ld_, d, ld_, &algo,
                             workspace.as<void>(), workspace.bytes(), stream));
  }

 private:
  void describe_product(const LtSpec& spec) {
    RY_CUBLAS(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = spec.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, &spec.epilogue, sizeof(spec.epilogue));
    if (spec.aux != nullptr) {
      const int64_t ld = spec.ldd;
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld));
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &spec.aux, sizeof(spec.aux));
    }
    if (spec.bias != nullptr) {
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &spec.bias, sizeof(spec.bias));
      if (spec.bias_type >= 0) {
        const int32_t t = spec.bias_type;
        set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof(t));
      }
    }
    const int a_rows = spec.trans_a ? spec.k : spec.m, a_cols = spec.trans_a ? spec.m : spec.k;
    RY_CUBLAS(cublasLtMatrixLayoutCreate(&la_, CUDA_R_16BF, a_rows, a_cols, spec.lda));
    RY_CUBLAS(cublasLtMatrixLayoutCreate(&lb_, CUDA_R_16BF, spec.k, spec.n, spec.ldb));
    RY_CUBLAS(cublasLtMatrixLayoutCreate(&ld_, CUDA_R_16BF, spec.m, spec.n, spec.ldd));
  }
  void release() {
    if (la_ != nullptr) cublasLtMatrixLayoutDestroy(la_);
    if (lb_ != nullptr) cublasLtMatrixLayoutDestroy(lb_);
    if (ld_ != nullptr) cublasLtMatrixLayoutDestroy(ld_);
    if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
    la_ = lb_ = ld_ = nullptr;
    op_ = nullptr;
  }
  void set(cublasLtMatmulDescAttributes_t a, const void* v, size_t n) {
    RY_CUBLAS(cublasLtMatmulDescSetAttribute(op_, a, v, n));
  }

  cublasLtHandle_t handle_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, ld_ = nullptr;
};

std::vector<cublasLtMatmulHeuristicResult_t> LtProduct::candidates(int count, size_t workspace,
                                                                   bool fixed_order,
                                                                   std::string& why) const {
  cublasLtMatmulPreference_t pref = nullptr;
  RY_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>,
                  decltype(&cublasLtMatmulPreferenceDestroy)>
      owned(pref, &cublasLtMatmulPreferenceDestroy);
  const uint64_t ws = workspace;
  RY_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof(ws)));
  const uint32_t align = 16;
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    RY_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
  }
  const uint32_t schemes =
      fixed_order ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE
                  : CUBLASLT_REDUCTION_SCHEME_MASK;
  RY_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &schemes, sizeof(schemes)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(count);
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, op_, la_, lb_, ld_, ld_, pref,
                                                           count, results.data(), &found);
  if (st != CUBLAS_STATUS_SUCCESS) {
    why = std::string("the heuristic answered ") + cublasLtGetStatusName(st);
    return {};
  }
  results.resize(found);
  std::erase_if(results, [](const auto& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
  if (results.empty()) why = "the heuristic found no algorithm";
  return results;
}

// ---- variants --------------------------------------------------------------------------------

struct Span {
  const void* ptr;
  size_t bytes;
};

struct Variant {
  std::string group, name;
  json algo;                // the single cuBLASLt call's algorithm, null otherwise
  std::string not_offered;  // why cuBLASLt cannot run it; empty when it can
  std::function<void(cudaStream_t)> run;
  std::vector<Span> outputs;   // compared bit for bit between runs
  const void* main = nullptr;  // bf16 [N, 4C] output compared with the group's reference
  const void* db = nullptr;    // bias gradient [4C] compared with bias_grad's
  cudaDataType_t db_type = CUDA_R_32F;
};

// A variant's group and what it writes and is compared by; name and run come later.
Variant shaped(const char* group, std::vector<Span> outputs, const void* main,
               const void* db = nullptr, cudaDataType_t db_type = CUDA_R_32F) {
  Variant v;
  v.group = group;
  v.outputs = std::move(outputs);
  v.main = main;
  v.db = db;
  v.db_type = db_type;
  return v;
}

using Run = std::function<void(cudaStream_t)>;

void append(std::vector<Variant>& to, const Variant& shape, std::string name, json algo, Run run) {
  to.push_back(shape);
  to.back().name = std::move(name);
  to.back().algo = std::move(algo);
  to.back().run = std::move(run);
}

struct Result {
  std::string status = "ok";
  double median_us = NAN, min_us = NAN;
  bool checked = false, same_bits = false;
  double main_diff = NAN, db_diff = NAN;
};

// Everything the variants read and write, at one set of shapes.
struct Mlp {
  int N, C, H;  // rows, model width, hidden width (4C)
  // backward into the fc layer
  DeviceBuffer dy, w_proj, pre, dx, dp, db, db16, partials;
  // forward of the fc layer
  DeviceBuffer x, w_fc, b_fc, y, fc_pre;
  Mlp(int n, int c)
      : N(n),
        C(c),
        H(4 * c),
        dy(random_bf16(size_t(n) * c, 1.0f, 1)),
        w_proj(random_bf16(size_t(c) * 4 * c, 0.05f, 2)),
        pre(random_bf16(size_t(n) * 4 * c, 3.0f, 3)),
        dx(size_t(n) * 4 * c * sizeof(bf16)),
        dp(size_t(n) * 4 * c * sizeof(bf16)),
        db(size_t(4) * c * sizeof(float)),
        db16(size_t(4) * c * sizeof(bf16)),
        partials(std::max(railyard::cuda::bias_grad_partials(n, 4 * c),
                          size_t(railyard::bench::dgelu_colsum_chunks(n)) * 4 * c) *
                 sizeof(float)),
        x(random_bf16(size_t(n) * c, 1.0f, 4)),
        w_fc(random_bf16(size_t(4) * c * c, 0.05f, 5)),
        b_fc(random_bf16(size_t(4) * c, 0.1f, 6)),
        y(size_t(n) * 4 * c * sizeof(bf16)),
        fc_pre(size_t(n) * 4 * c * sizeof(bf16)) {}
  size_t act_bytes() const { return size_t(N) * H * sizeof(bf16); }
};

// Shared by the variants' closures; outlives them.
struct Context {
  Mlp& d;
  Matmul& mm;
  cublasLtHandle_t lt;
  const DeviceBuffer& workspace;  // the direct cuBLASLt calls' (Matmul has its own)
  int candidates;
  std::vector<std::unique_ptr<LtProduct>> products;
};

// The backward product into the fc layer, dX^T[4C, N] = W^T dY^T, with an epilogue.
LtSpec backward_spec(const Mlp& d, cublasLtEpilogue_t e) {
  LtSpec s;
  s.epilogue = e;
  s.m = d.H, s.n = d.N, s.k = d.C;
  s.lda = d.H, s.ldb = d.C, s.ldd = d.H;
  return s;
}

// The fc layer's forward product, Y^T[4C, N] = W_fc X^T, with an epilogue.
LtSpec forward_spec(const Mlp& d, cublasLtEpilogue_t e) {
  LtSpec s;
  s.epilogue = e;
  s.trans_a = true;
  s.m = d.H, s.n = d.N, s.k = d.C;
  s.lda = d.C, s.ldb = d.C, s.ldd = d.H;
  return s;
}

// The heuristic's candidates for one epilogue, D = `d`, each a variant like `shape` (group,
// outputs, what is compared); one "not offered" variant where there are none. Where none
// reduce in a fixed order, those with any reduction are tried (labelled so: the same-bits
// check says whether they are usable). `first` receives candidate 0's description.
void add_candidates(Context& c, std::vector<Variant>& out, const std::string& label,
                    const LtSpec& spec, const void* a, const void* b, void* d, const Variant& shape,
                    json* first = nullptr) {
  std::string why;
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  try {
    c.products.push_back(std::make_unique<LtProduct>(c.lt, spec));
    found = c.products.back()->candidates(c.candidates, c.workspace.bytes(), true, why);
  } catch (const std::exception& e) {
    why = e.what();
  }
  std::string name = label;
  if (found.empty() && why.rfind("the heuristic", 0) == 0) {
    std::string any_why;
    found = c.products.back()->candidates(c.candidates, c.workspace.bytes(), false, any_why);
    if (found.empty()) {
      why += "; with any split-K reduction: " + any_why;
    } else {
      name += " [in-place split-K allowed]";
    }
  }
  if (found.empty()) {
    Variant v = shape;
    v.name = label + ": not offered";
    v.not_offered = why;
    out.push_back(std::move(v));
    return;
  }
  const LtProduct* p = c.products.back().get();
  for (size_t i = 0; i < found.size(); ++i) {
    Variant v = shape;
    v.name = name + " #" + std::to_string(i) + (i == 0 ? " (heuristic pick)" : "");
    v.algo = describe(found[i]);
    if (i == 0 && first != nullptr) *first = v.algo;
    const cublasLtMatmulAlgo_t algo = found[i].algo;
    const DeviceBuffer& ws = c.workspace;
    v.run = [p, algo, a, b, d, &ws](cudaStream_t s) { p->run(algo, a, b, d, ws, s); };
    out.push_back(std::move(v));
  }
}

// What the backward variants write: dx alone, dx with an fp32 or bf16 bias gradient, or the
// plain product dp alone.
struct BackwardShapes {
  Span sdx, sdp, sdb;
  Variant only_dx, dx_db, dx_db16, only_dp;
};

BackwardShapes backward_shapes(Mlp& d) {
  bf16 *dx = d.dx.as<bf16>(), *dp = d.dp.as<bf16>();
  float* db = d.db.as<float>();
  const Span sdx{dx, d.act_bytes()}, sdp{dp, d.act_bytes()}, sdb{db, d.H * sizeof(float)};
  const Span sdb16{d.db16.as<void>(), d.H * sizeof(bf16)};
  return {sdx,
          sdp,
          sdb,
          shaped("backward", {sdx}, dx),
          shaped("backward", {sdx, sdb}, dx, db),
          shaped("backward", {sdx, sdb16}, dx, sdb16.ptr, CUDA_R_16BF),
          shaped("backward", {sdp}, nullptr)};
}

// Every candidate the heuristic offers for each backward epilogue; the DGELU and plain
// heuristic picks go to the named outputs.
std::vector<Variant> backward_candidates(Context& c, const BackwardShapes& s, json& dgelu_pick,
                                         json& plain_pick) {
  Mlp& d = c.d;
  bf16 *dx = d.dx.as<bf16>(), *dp = d.dp.as<bf16>();
  const bf16 *dy = d.dy.as<bf16>(), *w = d.w_proj.as<bf16>(), *pre = d.pre.as<bf16>();
  std::vector<Variant> cands;
  LtSpec dgelu = backward_spec(d, CUBLASLT_EPILOGUE_DGELU);
  dgelu.aux = pre;
  add_candidates(c, cands, "DGELU", dgelu, w, dy, dx, s.only_dx, &dgelu_pick);
  LtSpec bgrad = backward_spec(d, CUBLASLT_EPILOGUE_DGELU_BGRAD);
  bgrad.aux = pre, bgrad.bias = d.db.as<float>(), bgrad.bias_type = CUDA_R_32F;
  add_candidates(c, cands, "DGELU_BGRAD, fp32 bias gradient", bgrad, w, dy, dx, s.dx_db);
  bgrad.bias = d.db16.as<void>(), bgrad.bias_type = -1;
  add_candidates(c, cands, "DGELU_BGRAD, bf16 bias gradient", bgrad, w, dy, dx, s.dx_db16);
  add_candidates(c, cands, "plain (no epilogue)", backward_spec(d, CUBLASLT_EPILOGUE_DEFAULT), w,
                 dy, dp, s.only_dp, &plain_pick);
  return cands;
}

// The hand-made backward pieces: today's DGELU product, the bias_grad kernel, the plain
// product, and the fused dgelu + column-sum kernel with its second pass.
struct BackwardRuns {
  Run today, bias, plain, dgelu_sums;
};

BackwardRuns backward_runs(Context& c) {
  Mlp& d = c.d;
  bf16 *dx = d.dx.as<bf16>(), *dp = d.dp.as<bf16>();
  const bf16 *dy = d.dy.as<bf16>(), *w = d.w_proj.as<bf16>(), *pre = d.pre.as<bf16>();
  float *db = d.db.as<float>(), *part = d.partials.as<float>();
  const int N = d.N, C = d.C, H = d.H, chunks = railyard::bench::dgelu_colsum_chunks(N);
  Matmul* mm = &c.mm;
  BackwardRuns r;
  r.today = [mm, dx, dy, w, pre, N, C, H](cudaStream_t s) {
    mm->linear_backward_input(dx, dy, w, N, H, C, CUDA_R_16BF, false, s, pre);
  };
  r.bias = [db, part, dx, N, H](cudaStream_t s) {
    railyard::cuda::bias_grad(db, part, dx, N, H, false, s);
  };
  r.plain = [mm, dp, dy, w, N, C, H](cudaStream_t s) {
    mm->linear_backward_input(dp, dy, w, N, H, C, CUDA_R_16BF, false, s);
  };
  r.dgelu_sums = [dx, db, part, dp, pre, N, H, chunks](cudaStream_t s) {
    railyard::bench::dgelu_colsum(dx, part, dp, pre, N, H, s);
    railyard::cuda::ColumnSums sums;
    sums.partials = part;
    sums.rows = chunks;
    sums.cols = sums.width = H;
    sums.out[0] = db;
    railyard::cuda::sum_partial_columns(sums, s);
  };
  return r;
}

// Backward into the fc layer: today's DGELU epilogue (+ the bias kernel), DGELU_BGRAD, a plain
// product followed by the fused dgelu + column-sum kernel, each piece alone, then every
// candidate the heuristic offers for each epilogue. Pieces read what the variant before wrote.
std::vector<Variant> backward_variants(Context& c) {
  const BackwardShapes s = backward_shapes(c.d);
  json dgelu_pick, plain_pick;
  const std::vector<Variant> cands = backward_candidates(c, s, dgelu_pick, plain_pick);
  const BackwardRuns r = backward_runs(c);
  std::vector<Variant> v;
  auto add = [&v](const Variant& shape, std::string name, json algo, Run run) {
    append(v, shape, std::move(name), std::move(algo), std::move(run));
  };
  add(s.only_dx, "today: DGELU epilogue (Matmul)", dgelu_pick, r.today);
  add(s.dx_db, "today: DGELU epilogue + bias_grad kernel", nullptr, [r](cudaStream_t st) {
    r.today(st);
    r.bias(st);
  });
  add(shaped("backward", {s.sdb}, nullptr, s.sdb.ptr), "bias_grad kernel alone", nullptr, r.bias);
  add(s.only_dp, "plain product (Matmul)", plain_pick, r.plain);
  add(s.dx_db, "dgelu + column sums kernel + second pass alone", nullptr, r.dgelu_sums);
  Variant split = s.dx_db;
  split.outputs.push_back(s.sdp);
  add(split, "plain product + dgelu/column sums kernel + second pass", nullptr,
      [r](cudaStream_t st) {
        r.plain(st);
        r.dgelu_sums(st);
      });
  v.insert(v.end(), cands.begin(), cands.end());
  return v;
}

// The fc layer's forward: today's GELU_AUX_BIAS epilogue, the BIAS epilogue followed by the
// GELU kernel, each piece alone, GELU_BIAS without the aux output (what --recompute could
// use), then the heuristic's candidates.
std::vector<Variant> forward_variants(Context& c) {
  Mlp& d = c.d;
  bf16 *y = d.y.as<bf16>(), *pre = d.fc_pre.as<bf16>();
  const bf16 *x = d.x.as<bf16>(), *w = d.w_fc.as<bf16>(), *b = d.b_fc.as<bf16>();
  const int N = d.N, C = d.C, H = d.H;
  const Span sy{y, d.act_bytes()}, spre{pre, d.act_bytes()};
  const Variant y_pre = shaped("forward", {sy, spre}, y);
  const Variant only_y = shaped("forward", {sy}, y);
  const Variant only_pre = shaped("forward", {spre}, nullptr);

  std::vector<Variant> cands;
  json aux_pick, bias_pick;
  LtSpec aux = forward_spec(d, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
  aux.aux = pre, aux.bias = b;
  add_candidates(c, cands, "GELU_AUX_BIAS", aux, w, x, y, y_pre, &aux_pick);
  LtSpec bias = forward_spec(d, CUBLASLT_EPILOGUE_BIAS);
  bias.bias = b;
  add_candidates(c, cands, "BIAS", bias, w, x, pre, only_pre, &bias_pick);
  LtSpec gelu_bias = forward_spec(d, CUBLASLT_EPILOGUE_GELU_BIAS);
  gelu_bias.bias = b;
  add_candidates(c, cands, "GELU_BIAS (no aux output)", gelu_bias, w, x, y, only_y);

  Matmul* mm = &c.mm;
  auto today = [mm, y, x, w, b, pre, N, C, H](cudaStream_t s) {
    mm->linear_forward(y, x, w, b, N, C, H, CUDA_R_16BF, s, pre);
  };
  auto biased = [mm, pre, x, w, b, N, C, H](cudaStream_t s) {
    mm->linear_forward(pre, x, w, b, N, C, H, CUDA_R_16BF, s);
  };
  auto gelu = [y, pre, N, H](cudaStream_t s) {
    railyard::cuda::gelu_forward(y, pre, size_t(N) * H, s);
  };
  std::vector<Variant> v;
  auto add = [&v](const Variant& shape, std::string name, json algo, Run run) {
    append(v, shape, std::move(name), std::move(algo), std::move(run));
  };
  add(y_pre, "today: GELU_AUX_BIAS epilogue (Matmul)", aux_pick, today);
  add(only_pre, "BIAS epilogue (Matmul)", bias_pick, biased);
  add(only_y, "gelu kernel alone", nullptr, gelu);
  add(y_pre, "BIAS epilogue (Matmul) + gelu kernel", nullptr, [=](cudaStream_t s) {
    biased(s);
    gelu(s);
  });
  v.insert(v.end(), cands.begin(), cands.end());
  return v;
}

// ---- measuring -------------------------------------------------------------------------------

void time_calls(const Variant& v, cudaStream_t s, const Options& o, Result& r) {
  const auto t = railyard::bench::time_calls(v.run, s, o.warmup, o.reps);
  r.median_us = t.median_us;
  r.min_us = t.min_us;
}

// The outputs after one run on poisoned buffers, so a value left from an earlier run cannot
// pass for a result.
std::vector<std::vector<unsigned char>> run_and_read(const Variant& v, cudaStream_t s) {
  for (const Span& o : v.outputs) {
    RY_CUDA(cudaMemsetAsync(const_cast<void*>(o.ptr), 0xA5, o.bytes, s));
  }
  v.run(s);
  RY_CUDA(cudaStreamSynchronize(s));
  std::vector<std::vector<unsigned char>> out;
  for (const Span& o : v.outputs) out.push_back(download(o.ptr, o.bytes));
  return out;
}

struct Reference {
  std::vector<float> main, db;  // today's output and bias_grad's bias gradient
};

Result measure(const Variant& v, const Reference& ref, const Mlp& d, const Options& o,
               cudaStream_t s) {
  Result r;
  if (!v.not_offered.empty()) {
    r.status = "not offered: " + v.not_offered;
    return r;
  }
  try {
    if (o.once) {
      railyard::bench::launch_marker(s);
      v.run(s);
      RY_CUDA(cudaStreamSynchronize(s));
      return r;
    }
    time_calls(v, s, o, r);
    // Three runs: an order-dependent sum (float atomics) can match once by chance.
    const auto first = run_and_read(v, s);
    r.same_bits = run_and_read(v, s) == first;
    r.same_bits = run_and_read(v, s) == first && r.same_bits;
    r.checked = true;
    if (v.main != nullptr && !ref.main.empty()) {
      r.main_diff =
          relative_difference(download_floats(v.main, size_t(d.N) * d.H, CUDA_R_16BF), ref.main);
    }
    if (v.db != nullptr && !ref.db.empty()) {
      r.db_diff = relative_difference(download_floats(v.db, d.H, v.db_type), ref.db);
    }
  } catch (const std::exception& e) {
    r.status = std::string("failed: ") + e.what();
  }
  return r;
}

// Today's paths, once: the backward's DGELU output and bias_grad's sums, the forward's GELU.
std::map<std::string, Reference> references(Mlp& d, Matmul& mm, cudaStream_t s) {
  std::map<std::string, Reference> ref;
  mm.linear_backward_input(d.dx.as<bf16>(), d.dy.as<bf16>(), d.w_proj.as<bf16>(), d.N, d.H, d.C,
                           CUDA_R_16BF, false, s, d.pre.as<bf16>());
  railyard::cuda::bias_grad(d.db.as<float>(), d.partials.as<float>(), d.dx.as<bf16>(), d.N, d.H,
                            false, s);
  mm.linear_forward(d.y.as<bf16>(), d.x.as<bf16>(), d.w_fc.as<bf16>(), d.b_fc.as<bf16>(), d.N, d.C,
                    d.H, CUDA_R_16BF, s, d.fc_pre.as<bf16>());
  RY_CUDA(cudaStreamSynchronize(s));
  const size_t n = size_t(d.N) * d.H;
  ref["backward"] = {download_floats(d.dx.as<void>(), n, CUDA_R_16BF),
                     download_floats(d.db.as<void>(), d.H, CUDA_R_32F)};
  ref["forward"] = {download_floats(d.y.as<void>(), n, CUDA_R_16BF), {}};
  return ref;
}

// ---- reporting -------------------------------------------------------------------------------

std::string number(double v, const char* fmt) {
  if (std::isnan(v)) return "-";
  char s[32];
  std::snprintf(s, sizeof s, fmt, v);
  return s;
}

void print_row(const Variant& v, const Result& r) {
  const std::string bits = !r.checked ? "-" : r.same_bits ? "yes" : "NO";
  std::printf("%-8s %-58s %9s %9s %5s %9s %9s\n", v.group.c_str(), v.name.c_str(),
              number(r.median_us, "%.1f").c_str(), number(r.min_us, "%.1f").c_str(), bits.c_str(),
              number(r.main_diff, "%.2e").c_str(), number(r.db_diff, "%.2e").c_str());
  if (r.status != "ok") std::printf("         %s\n", r.status.c_str());
  if (!v.algo.is_null()) std::printf("         %s\n", algo_line(v.algo).c_str());
}

// JSON has no NaN or infinity: "not measured" is null, a non-finite difference "non-finite".
json figure(double x) {
  return std::isnan(x) ? json(nullptr) : std::isinf(x) ? json("non-finite") : json(x);
}

json to_json(const Variant& v, const Result& r, bool once) {
  return {{"group", v.group},
          {"name", v.name},
          {"status", r.status},
          {"median_us", figure(r.median_us)},
          {"min_us", figure(r.min_us)},
          {"same_bits", r.checked ? json(r.same_bits) : json(nullptr)},
          {"out_rel_diff", figure(r.main_diff)},
          {"db_rel_diff", figure(r.db_diff)},
          {"algo", v.algo},
          {"marker", once && r.status == "ok"}};
}

json header(const Options& o, const Mlp& d) {
  cudaDeviceProp prop{};
  RY_CUDA(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0;
  RY_CUDA(cudaRuntimeGetVersion(&runtime));
  return {{"gpu", prop.name},        {"cublaslt_version", cublasLtGetVersion()},
          {"cuda_runtime", runtime}, {"shapes", {{"N", d.N}, {"C", d.C}, {"H", d.H}}},
          {"warmup", o.warmup},      {"reps", o.reps},
          {"once", o.once}};
}

void run_bench(const Options& o) {
  std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> stream(nullptr, &cudaStreamDestroy);
  cudaStream_t s = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream.reset(s);
  Mlp d(o.batch * o.seq, o.dim);
  // A pageable cudaMemcpy may return before its DMA lands; the stream does not wait for it.
  RY_CUDA(cudaDeviceSynchronize());
  Matmul mm;
  cublasLtHandle_t h = nullptr;
  RY_CUBLAS(cublasLtCreate(&h));
  std::unique_ptr<cublasLtContext, decltype(&cublasLtDestroy)> lt(h, &cublasLtDestroy);
  const DeviceBuffer workspace(64u << 20);  // Matmul's default
  Context c{d, mm, h, workspace, o.candidates, {}};
  std::vector<Variant> all = backward_variants(c);
  for (Variant& v : forward_variants(c)) all.push_back(std::move(v));
  const auto ref = o.once ? std::map<std::string, Reference>{} : references(d, mm, s);

  json out = header(o, d);
  std::printf("GEMM epilogues, N=%d C=%d 4C=%d, bf16, fp32 accumulate, %s (cuBLASLt %zu)\n", d.N,
              d.C, d.H, out["gpu"].get<std::string>().c_str(), cublasLtGetVersion());
  std::printf("%-8s %-58s %9s %9s %5s %9s %9s\n", "pass", "variant", "median us", "min us", "same",
              "out diff", "db diff");
  for (const Variant& v : all) {
    const auto it = ref.find(v.group);
    const Result r = measure(v, it == ref.end() ? Reference{} : it->second, d, o, s);
    print_row(v, r);
    out["variants"].push_back(to_json(v, r, o.once));
  }
  std::printf(
      "same: outputs bit-identical over three runs; out diff: max |output - today's| / "
      "max |today's|; db diff: the same for the bias gradient against bias_grad's\n");
  if (!o.json.empty()) write_json(o.json, out);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::fprintf(stderr,
                   "gemm_epilogue_bench: no CUDA device (%s); run it on the GPU machine: "
                   "bash bench/gpu_bench.sh env build gemm\n",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
      return 77;
    }
    run_bench(o);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_epilogue_bench: %s\n", e.what());
    return 1;
  }
}
