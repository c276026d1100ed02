// Every distinct cuBLASLt product of one GPT-2 training step on the GPU (issue 12), each built
// exactly as the engine's Matmul builds it (runtime/cuda/matmul_cublaslt.cpp: same descriptors,
// preferences, fixed-order split-K only, workspace). Candidates: the heuristic's (up to
// --heuristic, its order), then configurations enumerated from what each cuBLASLt algorithm
// says it can do (runtime/cuda/gemm_config_space.hpp: up to --space of them, each set with
// cublasLtMatmulAlgoInit and passed by cublasLtMatmulAlgoCheck, repeats of a configuration
// already listed dropped), --candidates in all. Each is timed and checked: median and minimum of
// --reps launches after --warmup (CUDA events), the same bits in three runs with the outputs
// poisoned (NaN) between them (products with beta != 0 get their initial D back instead), and
// the largest difference from the heuristic's first (max |d| / max |first|). A candidate whose
// median of 3 launches is over --screen times the first's is "screened": not timed further nor
// checked, never picked; so is one cuBLASLt refuses to launch (its "error"). Per product the pick,
// by a fixed rule: the fastest candidate with the same bits every run, within --max-diff of the
// first and at least 3% faster than it; else the first. Then the step's time in products, first vs
// picks (each product times its calls per step). The picks are what runtime/cuda's pin table takes
// (bench/gemm_pins_from_survey.py prints its entries).
//
// Under the power limit (--sustain-ms N): the training step runs at the GPU's power limit, its
// clock well below the one a short burst of launches gets (1530-1680 MHz against 1980 on an
// H200, bench/NOTES.md), so there a product's time follows its energy more than its unthrottled
// speed. With N > 0 the usable candidates that timed fastest (at most --sustain-top, the first
// among them) are timed again with the GPU held at its limit: each launched back to back for N ms,
// then --reps launches timed, in two interleaved rounds ("sustained_ms", the mean of the two
// medians); the pick is then by that time, with the same rule.
//
//   gemm_step_survey [--batch 16 --seq 1024 --dim 768 --vocab 50304 --layers 12
//                     --head-chunk R --also-head-rows R] [--warmup 3 --reps 20 --candidates 128
//                     --heuristic 128 --space 768 --screen 1.5] [--max-seconds 55]
//                    [--sustain-ms 0 --sustain-top 6] [--json FILE]
// --vocab is the padded vocabulary the LM head's products use. The head runs in the engine's
// chunks (runtime/cuda/head_chunks.hpp; 5504, 5504, 5376 rows at the defaults), or in chunks of
// --head-chunk rows where given; --also-head-rows R lists the head's products at R rows too, at 0
// calls, so that the pin table also covers another chunk plan for an A/B. --max-seconds bounds the
// whole survey: each product gets an equal share of what is left, its candidates surveyed in order
// until the share is spent (the JSON says how many were).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "gemm_algo_json.hpp"
#include "gemm_survey_kernels.hpp"
#include "head_chunks.hpp"
#include "matmul_cublaslt.hpp"
#include "ones_column_kernels.hpp"
#include "railyard/gpt_config.hpp"
#include "railyard/param_layout.hpp"

using railyard::cuda::DeviceBuffer;
using railyard::cuda::GemmCall;
using railyard::cuda::Matmul;
using railyard::cuda::ones_column_ld;
using railyard::cuda::ones_column_row_stride;
using json = nlohmann::json;
using railyard::bench::describe;
using railyard::bench::write_json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kUsage =
    "usage: gemm_step_survey [--batch 16 --seq 1024 --dim 768 --vocab 50304 --layers 12\n"
    "                         --head-chunk R --also-head-rows R] [--warmup 3 --reps 20\n"
    "                         --candidates 128 --heuristic 128 --space 768 --screen 1.5]\n"
    "                        [--max-seconds 55] [--max-diff 0.01]\n"
    "                        [--sustain-ms 0 --sustain-top 6] [--json FILE]\n"
    "Times every cuBLASLt product of one GPT-2 training step with the heuristic's candidates\n"
    "and enumerated configurations, checks same bits over three runs, and picks per product\n"
    "by a fixed rule.\n";

struct Options {
  int batch = 16, seq = 1024, dim = 768, vocab = 50304, layers = 12;
  int head_chunk = 0, also_head_rows = 0;  // 0: the engine's chunks; none
  int warmup = 3, reps = 20, candidates = 128, heuristic = 128, space = 768, max_seconds = 55;
  int sustain_ms = 0, sustain_top = 6;  // 0: no timing under the power limit
  double max_diff = 1e-2, screen = 1.5;
  std::string json;
};

int positive(const std::string& flag, const char* value) {
  return railyard::bench::positive(flag, value, 1 << 24);
}

void check(const Options& o) {
  if (o.candidates > 1024 || o.heuristic > 1024 || o.space > 65536) {
    throw std::invalid_argument("--candidates " + std::to_string(o.candidates) + " --heuristic " +
                                std::to_string(o.heuristic) + " --space " +
                                std::to_string(o.space) +
                                ": at most 1024, 1024 and 65536 (each is timed or checked)");
  }
  if (o.dim % 8 != 0 || o.vocab % 8 != 0) {
    throw std::invalid_argument("--dim " + std::to_string(o.dim) + " --vocab " +
                                std::to_string(o.vocab) +
                                ": both must be multiples of 8 (16-byte rows of bf16)");
  }
  const int64_t rows = int64_t(o.batch) * o.seq;
  const int64_t head = std::max<int64_t>(std::min<int64_t>(o.head_chunk, rows), o.also_head_rows);
  if (rows * 4 * o.dim > (int64_t(1) << 31) || head * o.vocab > (int64_t(1) << 31)) {
    throw std::invalid_argument(
        "--batch/--seq/--dim/--vocab/--head-chunk/--also-head-rows: a product with more "
        "than 2^31 outputs; use smaller shapes");
  }
}

// Rows of each chunk of the LM head: the engine's plan for bf16 logits (it refuses a chunk of
// 2^31 logits), or chunks of --head-chunk rows.
std::vector<int> head_chunk_rows(const Options& o) {
  const int N = o.batch * o.seq;
  std::vector<int> rows;
  if (o.head_chunk > 0) {
    for (int r0 = 0; r0 < N; r0 += o.head_chunk) rows.push_back(std::min(N - r0, o.head_chunk));
    return rows;
  }
  const railyard::cuda::HeadChunks h = railyard::cuda::head_chunks(N, o.vocab, 2);
  for (int64_t i = 0; i < h.count; ++i) rows.push_back(int(railyard::cuda::head_chunk_rows(h, i)));
  return rows;
}

// A number in [lo, hi) or an error naming the flag.
double number(const std::string& flag, const char* v, double lo, double hi) {
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(x >= lo && x < hi)) {
    char range[64];
    std::snprintf(range, sizeof range, "[%g, %g)", lo, hi);
    throw std::invalid_argument(flag + " " + v + ": expected a number in " + range);
  }
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value\n" + kUsage);
      return argv[++i];
    };
    int* field = a == "--batch"         ? &o.batch
                 : a == "--seq"         ? &o.seq
                 : a == "--dim"         ? &o.dim
                 : a == "--vocab"       ? &o.vocab
                 : a == "--layers"      ? &o.layers
                 : a == "--head-chunk"  ? &o.head_chunk
                 : a == "--warmup"      ? &o.warmup
                 : a == "--reps"        ? &o.reps
                 : a == "--candidates"  ? &o.candidates
                 : a == "--heuristic"   ? &o.heuristic
                 : a == "--space"       ? &o.space
                 : a == "--max-seconds" ? &o.max_seconds
                 : a == "--sustain-top" ? &o.sustain_top
                                        : nullptr;
    if (field != nullptr) {
      *field = positive(a, next());
    } else if (a == "--also-head-rows") {
      o.also_head_rows = int(number(a, next(), 0, 1 << 24));
    } else if (a == "--sustain-ms") {
      o.sustain_ms = int(number(a, next(), 0, 10000));
    } else if (a == "--max-diff") {
      o.max_diff = number(a, next(), 0, 1);
    } else if (a == "--screen") {
      o.screen = number(a, next(), 1, 1e6);
    } else if (a == "--json") {
      o.json = next();
    } else {
      throw std::invalid_argument("unknown option " + a + "\n" + kUsage);
    }
  }
  check(o);
  return o;
}

// ---- the step's products ---------------------------------------------------------------------

// kForwardResidual: the forward with bias and the residual stream added in the epilogue (C, beta
// 1, another buffer than D): a product of its own in the pin table (beta_nonzero).
enum class Kind {
  kForward,
  kForwardResidual,
  kForwardGelu,
  kBackwardInput,
  kBackwardInputDgelu,
  kBackwardWeight
};

// One product as a linear_* call of the engine makes it: rows N, in I, out O.
struct ProductSpec {
  std::string name;
  Kind kind;
  int N, I, O;
  bool bias = false, accumulate = false;
  int calls = 0;  // per training step (0: only with gradient accumulation, or no longer issued)
  int ldx = 0;    // the input's row stride where not I (ln1, ln2 with their ones column)
  int batch = 1;  // a strided batch of this many (the attention projection's weight gradients)
};

// The LM head's four products at R rows (forward, backward-input, weight gradient "=" and "+="),
// at 0 calls, unless listed already.
void add_head_products(std::vector<ProductSpec>& p, int R, const Options& o) {
  const int C = o.dim;
  const std::string r = " (" + std::to_string(R) + " rows)";
  auto same_rows = [&](const ProductSpec& s) { return s.N == R && s.O == o.vocab; };
  if (std::find_if(p.begin(), p.end(), same_rows) != p.end()) return;
  p.push_back({"lm-head forward" + r, Kind::kForward, R, C, o.vocab});
  p.push_back({"lm-head backward-input" + r, Kind::kBackwardInput, R, C, o.vocab});
  p.push_back({"lm-head backward-weight =" + r, Kind::kBackwardWeight, R, C, o.vocab});
  p.push_back(
      {"lm-head backward-weight +=" + r, Kind::kBackwardWeight, R, C, o.vocab, false, true, 0});
}

// The attention projection's weight gradients, batched by 3 layers from the top as the engine
// issues them (cuda_engine.cpp, kProjWeightGroup; with 1 it runs the per-layer product, 0 calls
// here), the lowest group of L % 3 where L is not a multiple; at the engine's strides.
void add_proj_weight_batches(std::vector<ProductSpec>& p, const Options& o) {
  const int N = o.batch * o.seq, C = o.dim, L = o.layers;
  p.push_back({"attn-proj backward-weight = (batch 3)", Kind::kBackwardWeight, N, C, C, false,
               false, L / 3, 0, 3});
  p.push_back({"attn-proj backward-weight += (batch 3)", Kind::kBackwardWeight, N, C, C, false,
               true, 0, 0, 3});
  if (L % 3 != 0) {
    p.push_back({"attn-proj backward-weight = (batch " + std::to_string(L % 3) + ")",
                 Kind::kBackwardWeight, N, C, C, false, false, 1, 0, L % 3});
  }
}

// What runtime/cuda/cuda_engine.cpp issues in one step (forward, loss_head, backward) with
// the fused (cuDNN) attention: the unfused fallback's batched products are not part of it.
// ln1 and ln2 have a ones column (runtime/cuda/ones_column_kernels.hpp): the qkv and fc1
// forwards read them at their row stride ones_column_row_stride(C), and their weight gradients
// are one product over ones_column_ld(C) of those columns (the bias gradient the last), always "="
// (the split adds to the gradients); the plain C-input weight products stay listed, at 0 calls, to
// compare. The attention and MLP output projections add the residual in their epilogues; their
// forwards without it stay listed, at 0 calls, to compare (what the residual input costs).
std::vector<ProductSpec> step_products(const Options& o) {
  const int N = o.batch * o.seq, C = o.dim, L = o.layers, ld = ones_column_ld(C);
  const int stride = ones_column_row_stride(C);
  std::vector<ProductSpec> p = {
      {"qkv forward bias", Kind::kForward, N, C, 3 * C, true, false, L, stride},
      {"attn-proj forward bias+residual", Kind::kForwardResidual, N, C, C, true, false, L},
      {"attn-proj forward bias (no longer issued)", Kind::kForward, N, C, C, true, false, 0},
      {"fc1 forward gelu_aux", Kind::kForwardGelu, N, C, 4 * C, true, false, L, stride},
      {"fc2 forward bias+residual", Kind::kForwardResidual, N, 4 * C, C, true, false, L},
      {"fc2 forward bias (no longer issued)", Kind::kForward, N, 4 * C, C, true, false, 0},
      {"fc2 backward-input dgelu", Kind::kBackwardInputDgelu, N, 4 * C, C, false, false, L},
      {"fc2 backward-weight =", Kind::kBackwardWeight, N, 4 * C, C, false, false, L},
      {"fc1 backward-input", Kind::kBackwardInput, N, C, 4 * C, false, false, L},
      {"fc1 backward-weight =", Kind::kBackwardWeight, N, C, 4 * C, false, false, 0},
      {"fc1 backward-weight+bias (ones column) =", Kind::kBackwardWeight, N, ld, 4 * C, false,
       false, L, stride},
      {"attn-proj backward-input", Kind::kBackwardInput, N, C, C, false, false, L},
      // Per layer only with kProjWeightGroup 1 (add_proj_weight_batches).
      {"attn-proj backward-weight =", Kind::kBackwardWeight, N, C, C, false, false, 0},
      {"qkv backward-input", Kind::kBackwardInput, N, C, 3 * C, false, false, L},
      {"qkv backward-weight =", Kind::kBackwardWeight, N, C, 3 * C, false, false, 0},
      {"qkv backward-weight+bias (ones column) =", Kind::kBackwardWeight, N, ld, 3 * C, false,
       false, L, stride},
      // The same two products the other way round (m the outputs, n the ld inputs: dW^T), not
      // issued: where their tiles fit 776 better, the split would transpose instead.
      {"fc1 backward-weight+bias transposed (not issued)", Kind::kBackwardWeight, N, 4 * C, ld,
       false, false, 0},
      {"qkv backward-weight+bias transposed (not issued)", Kind::kBackwardWeight, N, 3 * C, ld,
       false, false, 0},
      {"fc2 backward-weight += (grad accumulation)", Kind::kBackwardWeight, N, 4 * C, C, false,
       true, 0},
      {"fc1 backward-weight += (grad accumulation)", Kind::kBackwardWeight, N, C, 4 * C, false,
       true, 0},
      {"attn-proj backward-weight += (grad accumulation)", Kind::kBackwardWeight, N, C, C, false,
       true, 0},
      {"qkv backward-weight += (grad accumulation)", Kind::kBackwardWeight, N, C, 3 * C, false,
       true, 0},
  };
  add_proj_weight_batches(p, o);
  // The LM head in its chunks; the weight gradient of the first chunk is "=" (without gradient
  // accumulation), of the others "+=". Then --also-head-rows's, at 0 calls.
  const std::vector<int> rows = head_chunk_rows(o);
  for (size_t i = 0; i < rows.size(); ++i) {
    add_head_products(p, rows[i], o);
    for (auto& s : p) {
      if (s.N != rows[i] || s.O != o.vocab) continue;
      const bool weight = s.kind == Kind::kBackwardWeight;
      if (!weight || s.accumulate == (i > 0)) ++s.calls;
    }
  }
  if (o.also_head_rows > 0) add_head_products(p, o.also_head_rows, o);
  return p;
}

// Operands of one product on the device, filled with fixed random values.
struct Operands {
  GemmCall call;
  std::vector<DeviceBuffer> owned;
  struct Out {
    void* ptr;
    size_t n;
    bool bf16;
    const void* init = nullptr;  // its starting values where beta != 0
  };
  std::vector<Out> outputs;  // what the product writes (a batch's: each product's own)
  double flops = 0;
};

void* buffer(Operands& ops, size_t n, bool bf16, float scale, uint64_t seed) {
  ops.owned.emplace_back(n * (bf16 ? 2 : 4));
  void* p = ops.owned.back().as<void>();
  if (scale > 0) railyard::bench::fill_uniform(p, n, bf16, scale, seed, nullptr);
  return p;
}

// The strides of a batch of weight gradients as the engine lays them out (cuda_engine.cpp,
// proj_weight_grad): dY the residual-gradient buffers, N O apart; X the layers' attention
// outputs, N I apart (their region, each 256-byte aligned: GPT-2's are); dW the layers'
// projection gradients, one layer's parameters apart in the flat buffer (gpt_param_layout).
railyard::cuda::WeightGradBatch engine_batch(const ProductSpec& s) {
  railyard::GptConfig cfg;
  cfg.layers = 2, cfg.dim = s.I, cfg.heads = 1;
  const railyard::ParamLayout layout = railyard::gpt_param_layout(cfg);
  const int64_t dw = int64_t(layout.at("h.1.attn.proj.weight").offset) -
                     int64_t(layout.at("h.0.attn.proj.weight").offset);
  return {s.batch, dw, int64_t(s.N) * s.O, int64_t(s.N) * s.I};
}

// dW [O, I] (fp32) from dY [N, O] and X [N, I] (rows ldx apart), or a batch of them at the
// engine's strides, each product's dW an output of its own (what lies between is not written).
void backward_weight_operands(Operands& ops, const ProductSpec& s) {
  const size_t N = s.N, I = s.I, O = s.O;
  const railyard::cuda::WeightGradBatch b =
      s.batch > 1 ? engine_batch(s) : railyard::cuda::WeightGradBatch{};
  const size_t count = size_t(b.count), x_n = N * size_t(s.ldx > 0 ? s.ldx : s.I);
  const size_t dw_n = (count - 1) * size_t(b.dw) + O * I;
  const void* dy = buffer(ops, (count - 1) * size_t(b.dy) + N * O, true, 1.0f, 4);
  const void* x = buffer(ops, (count - 1) * size_t(b.x) + x_n, true, 1.0f, 1);
  auto* dw = static_cast<float*>(buffer(ops, dw_n, false, 0, 0));
  const auto* init =
      s.accumulate ? static_cast<float*>(buffer(ops, dw_n, false, 0.01f, 5)) : nullptr;
  for (size_t i = 0; i < count; ++i) {
    const size_t at = i * size_t(b.dw);
    ops.outputs.push_back({dw + at, O * I, false, init != nullptr ? init + at : nullptr});
  }
  ops.flops *= double(count);
  ops.call =
      Matmul::backward_weight_call(dw, dy, x, s.N, s.I, s.O, CUDA_R_16BF, s.accumulate, s.ldx, b);
}

Operands operands(const ProductSpec& s) {
  Operands ops;
  ops.owned.reserve(8);  // pointers into owned stay valid
  const size_t N = s.N, I = s.I, O = s.O;
  const cudaDataType_t t = CUDA_R_16BF;
  ops.flops = 2.0 * double(N) * double(I) * double(O);
  const void* w = buffer(ops, O * I, true, 0.05f, 2);
  if (s.kind == Kind::kForward || s.kind == Kind::kForwardResidual ||
      s.kind == Kind::kForwardGelu) {
    const void* x = buffer(ops, N * size_t(s.ldx > 0 ? s.ldx : s.I), true, 1.0f, 1);
    const void* bias = s.bias ? buffer(ops, O, true, 0.1f, 3) : nullptr;
    const void* resid =
        s.kind == Kind::kForwardResidual ? buffer(ops, N * O, true, 1.0f, 7) : nullptr;
    void* y = buffer(ops, N * O, true, 0, 0);
    ops.outputs.push_back({y, N * O, true});
    void* pre = nullptr;
    if (s.kind == Kind::kForwardGelu) {
      pre = buffer(ops, N * O, true, 0, 0);
      ops.outputs.push_back({pre, N * O, true});
    }
    ops.call = Matmul::forward_call(y, x, w, bias, s.N, s.I, s.O, t, pre, s.ldx, resid);
  } else if (s.kind == Kind::kBackwardWeight) {
    backward_weight_operands(ops, s);
  } else {
    const void* dy = buffer(ops, N * O, true, 1.0f, 4);
    void* dx = buffer(ops, N * I, true, 0, 0);
    ops.outputs.push_back({dx, N * I, true});
    const void* pre =
        s.kind == Kind::kBackwardInputDgelu ? buffer(ops, N * I, true, 3.0f, 6) : nullptr;
    ops.call = Matmul::backward_input_call(dx, dy, w, s.N, s.I, s.O, t, s.accumulate, pre);
  }
  RY_CUDA(cudaDeviceSynchronize());
  return ops;
}

// ---- one candidate -------------------------------------------------------------------------

struct Measured {
  double median_ms = 0, min_ms = 0, rel_diff = 0;
  bool same_bits = true, screened = false;
};

// Outputs before a run: NaN everywhere (what a run does not write shows), or D's initial values
// where the product adds to D.
void reset_outputs(const Operands& ops, cudaStream_t s) {
  for (const auto& o : ops.outputs) {
    const size_t bytes = o.n * (o.bf16 ? 2 : 4);
    if (o.init != nullptr) {
      RY_CUDA(cudaMemcpyAsync(o.ptr, o.init, bytes, cudaMemcpyDeviceToDevice, s));
    } else {
      RY_CUDA(cudaMemsetAsync(o.ptr, 0xff, bytes, s));
    }
  }
}

// Median and minimum of `reps` launches after `warmup`.
std::pair<double, double> time_launches(Matmul& mm, const Operands& ops,
                                        const cublasLtMatmulAlgo_t& algo, int warmup, int reps,
                                        cudaStream_t s) {
  for (int i = 0; i < warmup; ++i) mm.gemm_with(ops.call, algo, s);
  std::vector<cudaEvent_t> ev(2 * size_t(reps));
  for (auto& e : ev) RY_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < reps; ++i) {
    RY_CUDA(cudaEventRecord(ev[2 * i], s));
    mm.gemm_with(ops.call, algo, s);
    RY_CUDA(cudaEventRecord(ev[2 * i + 1], s));
  }
  RY_CUDA(cudaStreamSynchronize(s));
  std::vector<double> ms(reps);
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    RY_CUDA(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
    ms[i] = t;
  }
  for (auto& e : ev) RY_CUDA(cudaEventDestroy(e));
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

// Copies of the outputs: the first run's of this candidate, and the heuristic's first's.
struct Copies {
  std::vector<DeviceBuffer> run0, first;
  DeviceBuffer scratch{3 * sizeof(unsigned)};
};

// `first_ms` is the heuristic's first's median (0 while measuring the first itself).
Measured measure(Matmul& mm, const Operands& ops, const cublasLtMatmulAlgo_t& algo, double first_ms,
                 Copies& c, const Options& o, cudaStream_t s) {
  Measured m;
  const bool is_first = first_ms == 0;
  if (!is_first) {
    std::tie(m.median_ms, m.min_ms) = time_launches(mm, ops, algo, 1, 3, s);
    if (m.median_ms > o.screen * first_ms) {
      m.screened = true, m.same_bits = false;
      return m;
    }
  }
  std::tie(m.median_ms, m.min_ms) = time_launches(mm, ops, algo, o.warmup, o.reps, s);
  for (int run = 0; run < 3; ++run) {
    reset_outputs(ops, s);
    mm.gemm_with(ops.call, algo, s);
    for (size_t i = 0; i < ops.outputs.size(); ++i) {
      const auto& out = ops.outputs[i];
      const size_t bytes = out.n * (out.bf16 ? 2 : 4);
      if (run == 0) {
        RY_CUDA(cudaMemcpyAsync(c.run0[i].as<void>(), out.ptr, bytes, cudaMemcpyDeviceToDevice, s));
        if (is_first) {
          RY_CUDA(
              cudaMemcpyAsync(c.first[i].as<void>(), out.ptr, bytes, cudaMemcpyDeviceToDevice, s));
        }
        continue;
      }
      const auto cmp = railyard::bench::compare(out.ptr, c.run0[i].as<void>(), out.n, out.bf16,
                                                c.scratch.as<unsigned>(), s);
      m.same_bits = m.same_bits && cmp.same_bits;
    }
  }
  for (size_t i = 0; i < ops.outputs.size(); ++i) {
    const auto& out = ops.outputs[i];
    const auto cmp = railyard::bench::compare(c.run0[i].as<void>(), c.first[i].as<void>(), out.n,
                                              out.bf16, c.scratch.as<unsigned>(), s);
    const double d = cmp.max_abs_ref > 0 ? cmp.max_abs_diff / cmp.max_abs_ref : cmp.max_abs_diff;
    m.rel_diff = std::max(m.rel_diff, d);
  }
  return m;
}

// ---- one product ---------------------------------------------------------------------------

const char* epilogue_name(const GemmCall& c) {
  if (c.gelu == railyard::cuda::GeluEpilogue::kForward) return "GELU_AUX_BIAS";
  if (c.gelu == railyard::cuda::GeluEpilogue::kBackward) return "DGELU";
  return c.bias != nullptr ? "BIAS" : "DEFAULT";
}

json call_json(const ProductSpec& s, const GemmCall& c) {
  return {{"name", s.name},
          {"calls_per_step", s.calls},
          {"rows", s.N},
          {"in", s.I},
          {"out", s.O},
          {"trans_a", c.trans_a},
          {"trans_b", c.trans_b},
          {"m", c.m},
          {"n", c.n},
          {"k", c.k},
          {"lda", c.lda},
          {"ldb", c.ldb},
          {"ab_type", "bf16"},
          {"d_type", c.d_type == CUDA_R_32F ? "fp32" : "bf16"},
          {"epilogue", epilogue_name(c)},
          {"beta_nonzero", c.beta != 0.0f},
          {"batch", c.batch},
          {"batch_strides", {c.stride_a, c.stride_b, c.stride_d}}};
}

// Whether a candidate may be picked: the same bits every run, within max_diff of the first.
bool usable(const json& c, double max_diff) {
  return !c["screened"].get<bool>() && c["same_bits"].get<bool>() &&
         c["rel_diff_vs_first"].get<double>() <= max_diff;
}

// The fixed rule: the fastest usable candidate at least 3% faster than the first, else the first;
// times from `key` (median_ms, or sustained_ms where only some candidates have one).
size_t pick(const json& cands, double max_diff, const char* key = "median_ms") {
  size_t best = 0;
  const double first = cands[0][key].get<double>();
  for (size_t i = 1; i < cands.size(); ++i) {
    const auto& c = cands[i];
    if (!c.contains(key) || !usable(c, max_diff)) continue;
    const double t = c[key].get<double>();
    if (t <= 0.97 * first && t < cands[best][key].get<double>()) best = i;
  }
  return best;
}

// ---- under the power limit -------------------------------------------------------------------

// The candidate's median of --reps launches after about --sustain-ms of it back to back.
double sustained(Matmul& mm, const Operands& ops, const cublasLtMatmulAlgo_t& algo,
                 double median_ms, const Options& o, cudaStream_t s) {
  const int launches = int(std::min(1e6, std::ceil(o.sustain_ms / std::max(median_ms, 1e-3))));
  return time_launches(mm, ops, algo, launches, o.reps, s).first;
}

// The first and the fastest usable candidates, at most --sustain-top in all, timed under the power
// limit in two interleaved rounds; each gets "sustained_ms".
void time_sustained(Matmul& mm, const Operands& ops, const std::vector<cublasLtMatmulAlgo_t>& algos,
                    json& cands, const Options& o, cudaStream_t s) {
  std::vector<size_t> order;
  for (size_t i = 1; i < cands.size(); ++i) {
    if (usable(cands[i], o.max_diff)) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return cands[a]["median_ms"].get<double>() < cands[b]["median_ms"].get<double>();
  });
  order.insert(order.begin(), 0);
  order.resize(std::min(order.size(), size_t(o.sustain_top)));
  std::vector<double> sum(order.size(), 0.0);
  for (int round = 0; round < 2; ++round) {
    for (size_t j = 0; j < order.size(); ++j) {
      const size_t i = order[j];
      sum[j] += sustained(mm, ops, algos[i], cands[i]["median_ms"].get<double>(), o, s);
    }
  }
  for (size_t j = 0; j < order.size(); ++j) {
    cands[order[j]]["sustained_ms"] = sum[j] / 2;
    std::printf("  #%-3zu under the power limit %9.4f ms (alone %9.4f)\n", order[j], sum[j] / 2,
                cands[order[j]]["median_ms"].get<double>());
  }
}

void print_candidate(size_t i, const json& c, double flops) {
  const bool screened = c["screened"].get<bool>(), failed = c.contains("error");
  std::printf("  #%-3zu %-4s %9.4f %9.4f %7.1f  %-4s %9.2e  %s ws %zu\n", i,
              c["source"].get<std::string>() == "heuristic" ? "heur" : "enum",
              c["median_ms"].get<double>(), c["min_ms"].get<double>(),
              flops / (c["median_ms"].get<double>() * 1e9),
              failed                       ? "FAIL"
              : screened                   ? "slow"
              : c["same_bits"].get<bool>() ? "yes"
                                           : "NO",
              c["rel_diff_vs_first"].get<double>(), c["config"].get<std::string>().c_str(),
              c["workspace_bytes"].get<size_t>());
}

// What to survey for one product: the heuristic's candidates, then the enumerated
// configurations that initialise and pass the check and are not yet listed, --candidates in
// all. `stats` receives how many the heuristic offered, the space held and the check passed.
std::vector<std::pair<cublasLtMatmulHeuristicResult_t, bool>> candidate_list(Matmul& mm,
                                                                             const GemmCall& call,
                                                                             const Options& o,
                                                                             json& stats) {
  std::vector<std::pair<cublasLtMatmulHeuristicResult_t, bool>> out;  // (result, enumerated)
  std::vector<railyard::cuda::GemmAlgoConfig> listed;
  for (const auto& r : mm.candidates(call, o.heuristic)) {
    if (out.size() >= size_t(o.candidates)) break;
    out.emplace_back(r, false);
    listed.push_back(railyard::cuda::algo_config_of(r.algo));
  }
  stats["offered"] = out.size();
  const auto space = railyard::cuda::config_space(listed, mm.algo_caps(call), size_t(o.space));
  size_t passed = 0;
  for (const auto& config : space) {
    if (out.size() >= size_t(o.candidates)) break;
    const auto r = mm.checked(call, config);
    if (!r) continue;
    ++passed;
    // What cuBLASLt made of the configuration: two may come out as one.
    const auto actual = railyard::cuda::algo_config_of(r->algo);
    if (std::find(listed.begin(), listed.end(), actual) != listed.end()) continue;
    out.emplace_back(*r, true);
    listed.push_back(actual);
  }
  stats["space"] = space.size();
  stats["space_passed_check"] = passed;
  return out;
}

json survey_product(Matmul& mm, const ProductSpec& s, const Options& o, double seconds,
                    cudaStream_t stream) {
  const auto start = Clock::now();
  Operands ops = operands(s);
  json out = call_json(s, ops.call);
  const auto found = candidate_list(mm, ops.call, o, out);
  Copies copies;
  for (const auto& x : ops.outputs) {
    copies.run0.emplace_back(x.n * (x.bf16 ? 2 : 4));
    copies.first.emplace_back(x.n * (x.bf16 ? 2 : 4));
  }
  std::printf("%s: m %d n %d k %d, %s, beta %s, %zu candidates, %d calls per step\n",
              s.name.c_str(), ops.call.m, ops.call.n, ops.call.k, epilogue_name(ops.call),
              ops.call.beta != 0.0f ? "1" : "0", found.size(), s.calls);
  std::printf("  #    from  median ms    min ms  TFLOPS  bits   vs first  config\n");
  json cands = json::array();
  std::vector<cublasLtMatmulAlgo_t> algos;
  double first_ms = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    if (i > 0 && std::chrono::duration<double>(Clock::now() - start).count() > seconds) break;
    json c = describe(found[i].first);
    c["rank"] = i;
    c["source"] = found[i].second ? "enumerated" : "heuristic";
    Measured m;
    try {
      m = measure(mm, ops, found[i].first.algo, first_ms, copies, o, stream);
    } catch (const std::runtime_error& e) {
      // cublasLtMatmulAlgoCheck passing does not promise a launch: an enumerated configuration
      // cuBLASLt then refuses is recorded, never picked. The heuristic's first must run.
      if (i == 0) throw;
      RY_CUDA(cudaStreamSynchronize(stream));
      m.same_bits = false, m.screened = true;
      c["error"] = e.what();
    }
    if (i == 0) first_ms = m.median_ms;
    c["median_ms"] = m.median_ms;
    c["min_ms"] = m.min_ms;
    c["same_bits"] = m.same_bits;
    c["screened"] = m.screened;
    c["rel_diff_vs_first"] = m.rel_diff;
    print_candidate(i, c, ops.flops);
    cands.push_back(std::move(c));
    algos.push_back(found[i].first.algo);
  }
  if (o.sustain_ms > 0) time_sustained(mm, ops, algos, cands, o, stream);
  const char* key = o.sustain_ms > 0 ? "sustained_ms" : "median_ms";
  const size_t p = pick(cands, o.max_diff, key);
  out["listed"] = found.size();
  out["surveyed"] = cands.size();
  out["tflops_first"] = ops.flops / (cands[0]["median_ms"].get<double>() * 1e9);
  out["candidates"] = cands;
  out["pick"] = p;
  out["pick_config"] = cands[p]["config"];
  std::printf("  pick #%zu: %.4f ms (first %.4f ms)%s\n\n", p, cands[p][key].get<double>(),
              cands[0][key].get<double>(),
              cands.size() < found.size() ? "  [survey cut short by --max-seconds]" : "");
  return out;
}

// ---- the survey ----------------------------------------------------------------------------

json header(const Options& o) {
  int dev = 0;
  RY_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  RY_CUDA(cudaGetDeviceProperties(&prop, dev));
  return {{"bench", "gemm_step_survey"},
          {"batch", o.batch},
          {"seq", o.seq},
          {"dim", o.dim},
          {"vocab_padded", o.vocab},
          {"layers", o.layers},
          {"head_chunk", o.head_chunk},
          {"head_chunk_rows", head_chunk_rows(o)},
          {"also_head_rows", o.also_head_rows},
          {"warmup", o.warmup},
          {"reps", o.reps},
          {"max_candidates", o.candidates},
          {"max_heuristic", o.heuristic},
          {"max_space", o.space},
          {"screen", o.screen},
          {"max_diff", o.max_diff},
          {"sustain_ms", o.sustain_ms},
          {"sustain_top", o.sustain_top},
          {"sm", prop.major * 10 + prop.minor},
          {"device", prop.name},
          {"cublaslt_version", cublasLtGetVersion()}};
}

void run_survey(const Options& o) {
  const auto start = Clock::now();
  json result = header(o);
  Matmul mm;
  result["workspace_bytes"] = mm.workspace_bytes();
  cudaStream_t stream = nullptr;
  RY_CUDA(cudaStreamCreate(&stream));
  const auto specs = step_products(o);
  const char* key = o.sustain_ms > 0 ? "sustained_ms" : "median_ms";
  json products = json::array();
  double first_ms = 0, pick_ms = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const double left = o.max_seconds - std::chrono::duration<double>(Clock::now() - start).count();
    json p = survey_product(mm, specs[i], o, left / double(specs.size() - i), stream);
    const auto& c = p["candidates"];
    first_ms += specs[i].calls * c[0][key].get<double>();
    pick_ms += specs[i].calls * c[p["pick"].get<size_t>()][key].get<double>();
    products.push_back(std::move(p));
  }
  RY_CUDA(cudaStreamDestroy(stream));
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "step products: heuristic's firsts %.3f ms, picks %.3f ms (%.1f%% less); survey "
      "took %.1f s\n",
      first_ms, pick_ms, 100.0 * (first_ms - pick_ms) / first_ms, elapsed);
  result["products"] = products;
  result["step_ms_first"] = first_ms;
  result["step_ms_picks"] = pick_ms;
  result["elapsed_s"] = elapsed;
  if (!o.json.empty()) write_json(o.json, result);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run_survey(parse(argc, argv));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_step_survey: %s\n", e.what());
    return 1;
  }
}
