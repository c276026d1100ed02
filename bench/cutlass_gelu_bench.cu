// The MLP's GELU products at GPT-2 124M's shapes as CUTLASS Hopper kernels with the GELU fused in
// the epilogue (cutlass_gelu_gemms.hpp), beside cuBLASLt's GELU_AUX_BIAS and DGELU (what the
// engine runs) and the same products without the GELU, in one call (bench/NOTES.md, issue 12):
//   forward   Y[N,4C] = GELU(pre), pre = X[N,C] W_fc[4C,C]^T + b_fc   (also writes pre)
//   backward  dH[N,4C] = (dY[N,C] W_proj[C,4C]) * GELU'(pre)
//             and with the fc bias gradient db[4C] = column sums of dH (fp32): CUTLASS's fused
//             fixed-order reduction beside DGELU + runtime/cuda's bias_grad kernel (today's path)
//   residual  Y[N,C] = A W^T + b + R (the attention projection: A [N,C]; fc2: A [N,4C]), R the
//             incoming residual stream as the epilogue's C: the engine's CUTLASS class in each
//             tile configuration beside the engine's cuBLASLt call (Matmul::linear_forward with
//             the residual, its pin); R must be left as it was
// Per variant: median and minimum of --reps calls, each between its own pair of CUDA events
// (after --warmup); the outputs' relative L2 difference to a float64 host reference on a sample
// of rows (tolerance 1e-2, as tests/gpu's bf16 checks), the bias gradient's to the column sums
// of the variant's own dH in float64; the same bits (all outputs) on a second launch.
//
//   cutlass_gelu_bench [--warmup 5 --reps 30] [--json FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "bias_grad_kernels.hpp"
#include "cuda_check.hpp"
#include "cutlass_gelu_gemms.hpp"
#include "device_buffer.hpp"
#include "dtype.hpp"
#include "event_timing.hpp"
#include "gemm_algo_json.hpp"
#include "matmul_cublaslt.hpp"
#include "railyard/cpu_kernels.hpp"
#include "railyard/splitmix64.hpp"
#include "residual_gemm_cutlass.hpp"

using railyard::bench::GeluGemmOperands;
using railyard::bench::GeluProduct;
using railyard::cuda::bf16;
using railyard::cuda::DeviceBuffer;
using railyard::cuda::Matmul;
using json = nlohmann::json;

namespace {

constexpr const char* kUsage =
    "usage: cutlass_gelu_bench [--warmup 5 --reps 30] [--json FILE]\n"
    "Times the MLP's GELU products (fc forward with bias + GELU + saved input, fc2 backward\n"
    "input times GELU', also with the bias gradient fused) as CUTLASS sm_90a kernels beside\n"
    "cuBLASLt's GELU_AUX_BIAS / DGELU (+ bias_grad kernel) and the plain products, and the\n"
    "residual forwards (attention projection, fc2: + bias + residual stream) beside the\n"
    "engine's cuBLASLt call; checks each against float64 on sampled rows and for the same bits.\n";

// GPT-2 124M at micro-batch 16, sequence 1024.
constexpr int kTokens = 16 * 1024, kC = 768, kH = 4 * kC;
constexpr int kSampleRows = 48;
constexpr double kTolerance = 1e-2;
constexpr GeluProduct kProducts[] = {GeluProduct::kForward,          GeluProduct::kPlainForward,
                                     GeluProduct::kBackward,         GeluProduct::kPlainBackward,
                                     GeluProduct::kBackwardBiasGrad, GeluProduct::kAttnProjResidual,
                                     GeluProduct::kFc2Residual};

// ---- data ----------------------------------------------------------------------------------

// A device bf16 matrix and its host values, uniform in [-scale, scale] from splitmix64 (the same
// inputs on every run and machine).
struct Matrix {
  std::vector<double> host;
  DeviceBuffer dev;
  const bf16* ptr() const { return dev.as<bf16>(); }
};

Matrix random_matrix(size_t n, double scale, uint64_t seed) {
  std::vector<bf16> h(n);
  Matrix m{std::vector<double>(n), DeviceBuffer(n * sizeof(bf16))};
  for (size_t i = 0; i < n; ++i) {
    const double u = double(railyard::splitmix64(seed * 0x100000000ULL + i) >> 11) * 0x1p-53;
    h[i] = __float2bfloat16(static_cast<float>((2 * u - 1) * scale));
    m.host[i] = double(__bfloat162float(h[i]));
  }
  RY_CUDA(cudaMemcpy(m.dev.as<void>(), h.data(), m.dev.bytes(), cudaMemcpyHostToDevice));
  return m;
}

std::vector<unsigned char> download(const void* p, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  RY_CUDA(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  return h;
}

struct Inputs {
  Matrix x = random_matrix(size_t(kTokens) * kC, 1.0, 1);  // fc input (LayerNorm'd)
  Matrix w_fc = random_matrix(size_t(kH) * kC, 0.04, 2);   // [4C, C]
  Matrix b_fc = random_matrix(kH, 0.5, 3);
  Matrix dy = random_matrix(size_t(kTokens) * kC, 1.0, 4);     // gradient into fc2's output
  Matrix w_proj = random_matrix(size_t(kC) * kH, 0.04, 5);     // [C, 4C]
  Matrix pre = random_matrix(size_t(kTokens) * kH, 3.0, 6);    // GELU's input, for the backward
  Matrix w_attn = random_matrix(size_t(kC) * kC, 0.04, 7);     // attention projection [C, C]
  Matrix b_c = random_matrix(kC, 0.5, 8);                      // the residual products' bias
  Matrix resid = random_matrix(size_t(kTokens) * kC, 1.0, 9);  // the residual stream (their C)
  DeviceBuffer d{size_t(kTokens) * kH * sizeof(bf16)};
  DeviceBuffer aux{size_t(kTokens) * kH * sizeof(bf16)};
  DeviceBuffer dbias{size_t(kH) * sizeof(float)};
  DeviceBuffer partials{railyard::cuda::bias_grad_partials(kTokens, kH) * sizeof(float)};
  std::vector<int> rows;  // the rows the reference computes
};

std::vector<int> sample_rows() {
  std::vector<int> rows;
  for (int i = 0; i < kSampleRows; ++i)
    rows.push_back(static_cast<int>(railyard::splitmix64(1000 + i) % kTokens));
  return rows;
}

bool residual(GeluProduct p) {
  return p == GeluProduct::kAttnProjResidual || p == GeluProduct::kFc2Residual;
}
int out_width(GeluProduct p) {
  return residual(p) ? kC : kH;
}

// ---- reference -----------------------------------------------------------------------------

// The float64 values a product should give on the sampled rows: D, and for the GELU forward the
// value before GELU (aux).
struct Reference {
  std::vector<double> d, aux;
};

// The residual products: b + A W^T + R per sampled row, W [C, K] (fc2's is w_proj [C, 4C]).
Reference residual_reference(const Inputs& in, GeluProduct p) {
  const bool fc2 = p == GeluProduct::kFc2Residual;
  const int k_dim = fc2 ? kH : kC;
  const std::vector<double>& a = fc2 ? in.pre.host : in.x.host;
  const std::vector<double>& w = fc2 ? in.w_proj.host : in.w_attn.host;
  Reference r;
  for (int row : in.rows) {
    for (int c = 0; c < kC; ++c) {
      double s = in.b_c.host[c] + in.resid.host[size_t(row) * kC + c];
      for (int k = 0; k < k_dim; ++k) s += a[size_t(row) * k_dim + k] * w[size_t(c) * k_dim + k];
      r.d.push_back(s);
    }
  }
  return r;
}

Reference reference(const Inputs& in, GeluProduct p) {
  if (residual(p)) return residual_reference(in, p);
  const bool forward = p == GeluProduct::kForward || p == GeluProduct::kPlainForward;
  Reference r;
  std::vector<double> acc(kH), act(kH);
  for (int row : in.rows) {
    for (int c = 0; c < kH; ++c) {
      double s = forward ? in.b_fc.host[c] : 0.0;
      for (int k = 0; k < kC; ++k) {
        s += forward ? in.x.host[size_t(row) * kC + k] * in.w_fc.host[size_t(c) * kC + k]
                     : in.dy.host[size_t(row) * kC + k] * in.w_proj.host[size_t(k) * kH + c];
      }
      acc[c] = s;
    }
    if (p == GeluProduct::kForward) {
      railyard::cpu::gelu_forward<double>(act.data(), acc.data(), kH);
      r.aux.insert(r.aux.end(), acc.begin(), acc.end());
      acc = act;
    } else if (p == GeluProduct::kBackward || p == GeluProduct::kBackwardBiasGrad) {
      std::fill(act.begin(), act.end(), 0.0);  // gelu_backward accumulates
      railyard::cpu::gelu_backward<double>(act.data(), &in.pre.host[size_t(row) * kH], acc.data(),
                                           kH);
      acc = act;
    }
    r.d.insert(r.d.end(), acc.begin(), acc.end());
  }
  return r;
}

// The sampled rows of a [kTokens, width] bf16 output.
std::vector<double> sampled(const std::vector<unsigned char>& raw, const std::vector<int>& rows,
                            int width) {
  const auto* b = reinterpret_cast<const bf16*>(raw.data());
  std::vector<double> out;
  for (int row : rows)
    for (int c = 0; c < width; ++c)
      out.push_back(double(__bfloat162float(b[size_t(row) * width + c])));
  return out;
}

// sqrt(sum (a - ref)^2 / sum ref^2), as tests/gpu's Report::check; infinite where a value is not
// finite.
double relative_l2(const std::vector<double>& a, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// ---- variants ------------------------------------------------------------------------------

struct Variant {
  std::string name, library;
  GeluProduct product;
  std::function<void(cudaStream_t)> run;
};

const char* product_name(GeluProduct p) {
  switch (p) {
    case GeluProduct::kForward:
      return "forward GELU+aux+bias";
    case GeluProduct::kBackward:
      return "backward dGELU";
    case GeluProduct::kPlainForward:
      return "forward bias only";
    case GeluProduct::kPlainBackward:
      return "backward plain";
    case GeluProduct::kBackwardBiasGrad:
      return "backward dGELU + dbias";
    case GeluProduct::kAttnProjResidual:
      return "attn-proj bias+residual";
    case GeluProduct::kFc2Residual:
      return "fc2 bias+residual";
  }
  return "?";
}

GeluGemmOperands operands(const Inputs& in, GeluProduct p) {
  const bool forward = p == GeluProduct::kForward || p == GeluProduct::kPlainForward;
  GeluGemmOperands o;
  o.m = kTokens, o.n = kH, o.k = kC;
  o.a = forward ? in.x.ptr() : in.dy.ptr();
  o.b = forward ? in.w_fc.ptr() : in.w_proj.ptr();
  o.d = in.d.as<bf16>();
  if (forward) o.bias = in.b_fc.ptr();
  if (p == GeluProduct::kForward) o.aux_out = in.aux.as<bf16>();
  if (p == GeluProduct::kBackward) o.aux_in = in.pre.ptr();
  if (p == GeluProduct::kBackwardBiasGrad) {  // the transposed view: M = features
    o.m = kH, o.n = kTokens;
    o.a = in.w_proj.ptr();
    o.b = in.dy.ptr();
    o.aux_in = in.pre.ptr();
    o.dbias = in.dbias.as<float>();
  }
  return o;
}

// The engine's calls (Matmul's own plans), each product with and without the GELU.
std::vector<Variant> cublaslt_variants(const Inputs& in, Matmul& mm) {
  using railyard::cuda::GemmCall;
  const GemmCall fwd =
      Matmul::forward_call(in.d.as<void>(), in.x.ptr(), in.w_fc.ptr(), in.b_fc.ptr(), kTokens, kC,
                           kH, CUDA_R_16BF, in.aux.as<void>());
  GemmCall fwd_plain = fwd;
  fwd_plain.gelu = railyard::cuda::GeluEpilogue::kNone;
  fwd_plain.aux = nullptr;
  const GemmCall bwd =
      Matmul::backward_input_call(in.d.as<void>(), in.dy.ptr(), in.w_proj.ptr(), kTokens, kH, kC,
                                  CUDA_R_16BF, false, in.pre.ptr());
  GemmCall bwd_plain = bwd;
  bwd_plain.gelu = railyard::cuda::GeluEpilogue::kNone;
  bwd_plain.aux = nullptr;
  const GemmCall attn_res =
      Matmul::forward_call(in.d.as<void>(), in.x.ptr(), in.w_attn.ptr(), in.b_c.ptr(), kTokens, kC,
                           kC, CUDA_R_16BF, nullptr, 0, in.resid.ptr());
  const GemmCall fc2_res =
      Matmul::forward_call(in.d.as<void>(), in.pre.ptr(), in.w_proj.ptr(), in.b_c.ptr(), kTokens,
                           kH, kC, CUDA_R_16BF, nullptr, 0, in.resid.ptr());
  auto call = [&mm](GemmCall c) { return [&mm, c](cudaStream_t s) { mm.gemm(c, s); }; };
  auto with_bias_grad = [&mm, &in, bwd](cudaStream_t s) {
    mm.gemm(bwd, s);
    railyard::cuda::bias_grad(in.dbias.as<float>(), in.partials.as<float>(), in.d.as<bf16>(),
                              kTokens, kH, false, s);
  };
  return {
      {"cublaslt GELU_AUX_BIAS", "cublaslt", GeluProduct::kForward, call(fwd)},
      {"cublaslt BIAS", "cublaslt", GeluProduct::kPlainForward, call(fwd_plain)},
      {"cublaslt DGELU", "cublaslt", GeluProduct::kBackward, call(bwd)},
      {"cublaslt plain", "cublaslt", GeluProduct::kPlainBackward, call(bwd_plain)},
      {"cublaslt DGELU + bias_grad kernel", "cublaslt", GeluProduct::kBackwardBiasGrad,
       with_bias_grad},
      {"cublaslt BIAS + C (engine's call)", "cublaslt", GeluProduct::kAttnProjResidual,
       call(attn_res)},
      {"cublaslt BIAS + C (engine's call)", "cublaslt", GeluProduct::kFc2Residual, call(fc2_res)}};
}

// ---- measuring -----------------------------------------------------------------------------

struct Result {
  double median_us = NAN, min_us = NAN, rel_err = NAN, rel_err_aux = NAN, rel_err_db = NAN;
  bool same_bits = false, ok = false, resid_kept = true;
  std::string error;
};

void time_calls(const Variant& v, cudaStream_t s, const railyard::bench::TimingOptions& o,
                Result& r) {
  const auto t = railyard::bench::time_calls(v.run, s, o.warmup, o.reps);
  r.median_us = t.median_us;
  r.min_us = t.min_us;
}

// D (then aux for the GELU forward, the bias gradient for the backward with it) after one run on
// poisoned buffers, so a value left from an earlier variant cannot pass for a result.
std::vector<unsigned char> run_and_read(const Variant& v, const Inputs& in, cudaStream_t s) {
  RY_CUDA(cudaMemsetAsync(in.d.as<void>(), 0xA5, in.d.bytes(), s));
  RY_CUDA(cudaMemsetAsync(in.aux.as<void>(), 0xA5, in.aux.bytes(), s));
  RY_CUDA(cudaMemsetAsync(in.dbias.as<void>(), 0xA5, in.dbias.bytes(), s));
  v.run(s);
  RY_CUDA(cudaStreamSynchronize(s));
  auto out = download(in.d.as<void>(), in.d.bytes());
  std::vector<unsigned char> more;
  if (v.product == GeluProduct::kForward) more = download(in.aux.as<void>(), in.aux.bytes());
  if (v.product == GeluProduct::kBackwardBiasGrad)
    more = download(in.dbias.as<void>(), in.dbias.bytes());
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

// The bias gradient against the column sums of the variant's own dH (bf16 [kTokens, kH]) in
// float64: CUTLASS sums the fp32 values before their rounding to bf16, bias_grad the bf16 ones.
double bias_grad_difference(const std::vector<unsigned char>& raw) {
  const auto* d = reinterpret_cast<const bf16*>(raw.data());
  std::vector<double> sums(kH, 0.0), db(kH);
  for (size_t r = 0; r < size_t(kTokens); ++r)
    for (int c = 0; c < kH; ++c) sums[c] += double(__bfloat162float(d[r * kH + c]));
  const size_t d_bytes = size_t(kTokens) * kH * sizeof(bf16);
  std::vector<float> got(kH);
  std::memcpy(got.data(), raw.data() + d_bytes, kH * sizeof(float));
  for (int c = 0; c < kH; ++c) db[c] = got[c];
  return relative_l2(db, sums);
}

// Whether the residual stream still holds its inputs (a residual product only reads it).
bool resid_kept(const Inputs& in) {
  const auto raw = download(in.resid.ptr(), in.resid.dev.bytes());
  const auto* got = reinterpret_cast<const bf16*>(raw.data());
  for (size_t i = 0; i < in.resid.host.size(); ++i)
    if (double(__bfloat162float(got[i])) != in.resid.host[i]) return false;
  return true;
}

void check(const Variant& v, const Inputs& in, const Reference& ref, cudaStream_t s, Result& r) {
  const auto first = run_and_read(v, in, s);
  const auto second = run_and_read(v, in, s);
  r.same_bits = first == second;
  const int width = out_width(v.product);
  const size_t d_bytes = size_t(kTokens) * width * sizeof(bf16);
  r.rel_err = relative_l2(sampled({first.begin(), first.begin() + d_bytes}, in.rows, width), ref.d);
  bool more_ok = true;
  if (v.product == GeluProduct::kForward) {
    r.rel_err_aux =
        relative_l2(sampled({first.begin() + d_bytes, first.end()}, in.rows, kH), ref.aux);
    more_ok = r.rel_err_aux <= kTolerance;
  }
  if (v.product == GeluProduct::kBackwardBiasGrad) {
    r.rel_err_db = bias_grad_difference(first);
    more_ok = r.rel_err_db <= kTolerance;
  }
  if (residual(v.product)) r.resid_kept = resid_kept(in);
  r.ok = r.same_bits && r.rel_err <= kTolerance && more_ok && r.resid_kept;
}

// ---- report --------------------------------------------------------------------------------

json result_json(const Variant& v, const Result& r) {
  json j = {{"name", v.name}, {"library", v.library}, {"product", product_name(v.product)}};
  if (!r.error.empty()) {
    j["error"] = r.error;
    j["ok"] = false;
    return j;
  }
  j.update({{"median_us", r.median_us},
            {"min_us", r.min_us},
            {"rel_err", r.rel_err},
            {"same_bits", r.same_bits},
            {"ok", r.ok}});
  if (v.product == GeluProduct::kForward) j["rel_err_aux"] = r.rel_err_aux;
  if (v.product == GeluProduct::kBackwardBiasGrad) j["rel_err_dbias"] = r.rel_err_db;
  if (residual(v.product)) j["residual_kept"] = r.resid_kept;
  return j;
}

void print_row(const Variant& v, const Result& r) {
  if (!r.error.empty()) {
    std::printf("%-24s %-34s %s\n", product_name(v.product), v.name.c_str(), r.error.c_str());
    return;
  }
  const double second = v.product == GeluProduct::kForward ? r.rel_err_aux : r.rel_err_db;
  std::printf("%-24s %-34s %9.1f %9.1f %10.2e %10.2e %-5s %s\n", product_name(v.product),
              v.name.c_str(), r.median_us, r.min_us, r.rel_err, second, r.same_bits ? "yes" : "NO",
              r.ok ? "ok" : "FAIL");
}

// The CUTLASS variants as bench variants; one CUTLASS cannot run is reported, not fatal.
void add_cutlass(std::vector<Variant>& out, std::vector<std::string>& errors, const Inputs& in,
                 std::vector<std::unique_ptr<railyard::bench::GeluGemmLaunch>>& keep) {
  using railyard::bench::GeluGemmVariant;
  std::vector<GeluGemmVariant> all = railyard::bench::cutlass_forward_variants();
  for (auto f : {railyard::bench::cutlass_backward_variants,
                 railyard::bench::cutlass_backward_bias_grad_variants,
                 railyard::bench::cutlass_plain_variants})
    for (auto& v : f()) all.push_back(std::move(v));
  for (auto& cv : all) {
    try {
      keep.push_back(cv.prepare(operands(in, cv.product)));
      auto* launch = keep.back().get();
      out.push_back({cv.name, "cutlass", cv.product, [launch](cudaStream_t s) { launch->run(s); }});
      errors.emplace_back();
    } catch (const std::exception& e) {
      out.push_back({cv.name, "cutlass", cv.product, nullptr});
      errors.emplace_back(e.what());
    }
  }
}

// The engine's CUTLASS residual forward in each of its tiles, for both residual products (one
// object per tile serves both: each run() sets its operands).
void add_cutlass_residual(
    std::vector<Variant>& out, std::vector<std::string>& errors, const Inputs& in,
    std::vector<std::unique_ptr<railyard::cuda::CutlassResidualForward>>& keep) {
  using Tile = railyard::cuda::CutlassResidualForward::Tile;
  const std::pair<Tile, const char*> tiles[] = {
      {Tile::kPingpong128x128, "cutlass 128x128x64 c1x2 pingpong"},
      {Tile::kCooperative256x128, "cutlass 256x128x64 c2x1 coop"},
      {Tile::kCooperative128x256, "cutlass 128x256x64 c2x1 coop"}};
  for (const auto& [tile, name] : tiles) {
    std::string error;
    railyard::cuda::CutlassResidualForward* k = nullptr;
    try {
      keep.push_back(std::make_unique<railyard::cuda::CutlassResidualForward>(tile));
      k = keep.back().get();
    } catch (const std::exception& e) {
      error = e.what();
    }
    const std::string label =
        std::string(name) +
        (tile == railyard::cuda::CutlassResidualForward::kEngineTile ? " (engine)" : "");
    auto attn = [k, &in](cudaStream_t s) {
      k->run(in.d.as<bf16>(), in.x.ptr(), kC, in.w_attn.ptr(), in.b_c.ptr(), in.resid.ptr(),
             kTokens, kC, kC, s);
    };
    auto fc2 = [k, &in](cudaStream_t s) {
      k->run(in.d.as<bf16>(), in.pre.ptr(), kH, in.w_proj.ptr(), in.b_c.ptr(), in.resid.ptr(),
             kTokens, kH, kC, s);
    };
    out.push_back({label, "cutlass", GeluProduct::kAttnProjResidual, attn});
    out.push_back({label, "cutlass", GeluProduct::kFc2Residual, fc2});
    errors.push_back(error);
    errors.push_back(error);
  }
}

// Per product: cuBLASLt's median, the fastest CUTLASS configuration that passed its checks, and
// what taking it would save per step (12 layers), the figure bench/NOTES.md decides on.
json summary(const json& rows) {
  json out = json::array();
  std::printf("\n%-24s %10s %-34s %10s %12s\n", "product", "cublaslt", "best cutlass (checks ok)",
              "us", "x12 layers");
  for (GeluProduct p : kProducts) {
    const std::string name = product_name(p);
    double lt = NAN, best = INFINITY;
    std::string best_name = "none";
    for (const json& r : rows) {
      if (r["product"] != name || !r["ok"].get<bool>()) continue;
      const double us = r["median_us"].get<double>();
      if (r["library"] == "cublaslt") lt = us;
      if (r["library"] == "cutlass" && us < best) {
        best = us;
        best_name = r["name"].get<std::string>();
      }
    }
    const double saved_ms = std::isfinite(best) ? 12 * (lt - best) / 1e3 : NAN;
    std::printf("%-24s %10.1f %-34s %10.1f %9.3f ms\n", name.c_str(), lt, best_name.c_str(), best,
                saved_ms);
    out.push_back(
        {{"product", name},
         {"cublaslt_us", lt},
         {"best_cutlass", best_name},
         {"best_cutlass_us", std::isfinite(best) ? json(best) : json(nullptr)},
         {"step_saving_ms_12_layers", std::isfinite(saved_ms) ? json(saved_ms) : json(nullptr)}});
  }
  return out;
}

int run_bench(const railyard::bench::TimingOptions& o) {
  cudaDeviceProp prop{};
  int dev = 0;
  RY_CUDA(cudaGetDevice(&dev));
  RY_CUDA(cudaGetDeviceProperties(&prop, dev));
  Inputs in;
  in.rows = sample_rows();
  Matmul mm;
  std::vector<Variant> variants = cublaslt_variants(in, mm);
  std::vector<std::string> errors(variants.size());
  std::vector<std::unique_ptr<railyard::bench::GeluGemmLaunch>> keep;
  add_cutlass(variants, errors, in, keep);
  std::vector<std::unique_ptr<railyard::cuda::CutlassResidualForward>> keep_residual;
  add_cutlass_residual(variants, errors, in, keep_residual);
  cudaStream_t s = nullptr;
  RY_CUDA(cudaStreamCreate(&s));

  std::printf("%s, M=%d N=%d K=%d bf16, CUTLASS %s; us over %d reps after %d warmup\n", prop.name,
              kTokens, kH, kC, railyard::bench::cutlass_version().c_str(), o.reps, o.warmup);
  std::printf("%-24s %-34s %9s %9s %10s %10s %-5s\n", "product", "variant", "median", "min",
              "rel_err", "aux/dbias", "bits");
  json out = json::array();
  bool all_ok = true;
  for (GeluProduct p : kProducts) {
    const Reference ref = reference(in, p);
    for (size_t i = 0; i < variants.size(); ++i) {
      if (variants[i].product != p) continue;
      Result r;
      r.error = errors[i];
      if (r.error.empty()) {
        try {  // a configuration that fails to launch is a row, not the end of the table
          time_calls(variants[i], s, o, r);
          check(variants[i], in, ref, s, r);
        } catch (const std::runtime_error& e) {
          r.error = e.what();
        }
      }
      all_ok = all_ok && r.ok;
      print_row(variants[i], r);
      out.push_back(result_json(variants[i], r));
    }
  }
  RY_CUDA(cudaStreamDestroy(s));
  const json best = summary(out);
  if (!o.json.empty()) {
    railyard::bench::write_json(o.json, {{"bench", "cutlass_gelu_bench"},
                                         {"gpu", prop.name},
                                         {"cutlass", railyard::bench::cutlass_version()},
                                         {"shape", {{"m", kTokens}, {"n", kH}, {"k", kC}}},
                                         {"warmup", o.warmup},
                                         {"reps", o.reps},
                                         {"tolerance", kTolerance},
                                         {"variants", out},
                                         {"summary", best}});
  }
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto o = railyard::bench::parse_timing(argc, argv, kUsage);
    int devices = 0;
    const cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::fprintf(stderr,
                   "cutlass_gelu_bench: no CUDA device (%s); run it on the GPU machine: "
                   "bash bench/gpu_bench.sh env build cutlass\n",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
      return 77;
    }
    return run_bench(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cutlass_gelu_bench: %s\n", e.what());
    return 1;
  }
}
