// The layers' weight-gradient products alone (issue 12, runtime/cuda/weight_grad_cutlass.hpp):
// dW[O,I] = dY[N,O]^T X[N,I] in fp32 over GPT-2 124M's 16384 positions, the four of a layer
// (qkv and fc1 with the ones column: I = 776 read of rows 832 apart; fc2; the attention
// projection), each by cuBLASLt as the engine calls it (its pins included) and by every CUTLASS
// variant. Prints per product and variant the median and minimum microseconds, TFLOP/s, the error
// against float64 on sampled rows of dW (computed once per product), the largest difference from
// cuBLASLt's result, the workspace, and whether a second call gives the same bits.
//
//   weight_grad_bench [--warmup 5] [--reps 30] [--json FILE]
//
// Exits 1 where a variant does not repeat its bits or misses the float64 tolerance.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "cuda_check.hpp"
#include "device_buffer.hpp"
#include "dtype.hpp"
#include "event_timing.hpp"
#include "matmul_cublaslt.hpp"
#include "ones_column_kernels.hpp"
#include "railyard/splitmix64.hpp"
#include "weight_grad_cutlass.hpp"

using railyard::cuda::bf16;
using railyard::cuda::DeviceBuffer;
using json = nlohmann::json;
using Cutlass = railyard::cuda::CutlassWeightGrad;

namespace {

constexpr int kRows = 16384, kDim = 768;
constexpr int kSampledRows = 48;  // rows of dW checked against float64, the last one among them
// fp32 sums of 16384 bf16 products (split or not), relative to the largest |dW|; a wrong layout
// or a missed part is off by O(1).
constexpr double kTol = 1e-4;
constexpr const char* kUsage = "usage: weight_grad_bench [--warmup 5] [--reps 30] [--json FILE]\n";

// One product of the step as the engine issues it (bench/results/gemm-survey.json's names).
struct Shape {
  const char* name;
  int in, out, ldx;  // I (columns of X read), O, X's row stride
  bool ones_column;  // X's column I - 8 is 1 and the 7 after it 0 (ones_column_kernels.hpp)
};
constexpr int kOnes = railyard::cuda::ones_column_ld(kDim);
constexpr int kOnesStride = railyard::cuda::ones_column_row_stride(kDim);
const Shape kShapes[] = {
    {"qkv backward-weight+bias (ones column) =", kOnes, 3 * kDim, kOnesStride, true},
    {"fc1 backward-weight+bias (ones column) =", kOnes, 4 * kDim, kOnesStride, true},
    {"fc2 backward-weight =", 4 * kDim, kDim, 4 * kDim, false},
    {"attn-proj backward-weight =", kDim, kDim, kDim, false},
};

std::vector<float> bf16_values(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    x = float(bf16(float(railyard::splitmix64_next(seed) >> 40) / float(1 << 23) - 1.0f));
  }
  return v;
}

void upload(DeviceBuffer& d, const std::vector<float>& v) {
  std::vector<bf16> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = bf16(v[i]);
  RY_CUDA(cudaMemcpy(d.as<void>(), h.data(), h.size() * sizeof(bf16), cudaMemcpyHostToDevice));
}

// The operands of one shape on the device and the host (bf16 values exactly), and dW.
struct Operands {
  Shape s;
  std::vector<float> dy, x;
  DeviceBuffer d_dy, d_x, dw;
  explicit Operands(const Shape& shape)
      : s(shape),
        dy(bf16_values(size_t(kRows) * s.out, 1)),
        x(bf16_values(size_t(kRows) * s.ldx, 2)),
        d_dy(dy.size() * sizeof(bf16)),
        d_x(x.size() * sizeof(bf16)),
        dw(size_t(s.out) * s.in * sizeof(float)) {
    for (int n = 0; s.ones_column && n < kRows; ++n) {
      for (int c = kDim; c < s.ldx; ++c) x[size_t(n) * s.ldx + c] = c == kDim ? 1.0f : 0.0f;
    }
    upload(d_dy, dy);
    upload(d_x, x);
  }
  std::vector<float> result() const {
    std::vector<float> h(size_t(s.out) * s.in);
    RY_CUDA(cudaDeviceSynchronize());
    RY_CUDA(cudaMemcpy(h.data(), dw.as<void>(), h.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
  }
  int sampled_row(int j) const { return int(int64_t(s.out - 1) * j / (kSampledRows - 1)); }
  // dY^T X in float64 on the sampled rows of dW, row after row.
  std::vector<double> reference() const {
    std::vector<double> ref(size_t(kSampledRows) * s.in, 0.0);
    for (int j = 0; j < kSampledRows; ++j) {
      double* row = &ref[size_t(j) * s.in];
      for (int n = 0; n < kRows; ++n) {
        const double g = dy[size_t(n) * s.out + sampled_row(j)];
        const float* xr = &x[size_t(n) * s.ldx];
        for (int c = 0; c < s.in; ++c) row[c] += g * xr[c];
      }
    }
    return ref;
  }
  // Largest |dW - float64| over the sampled rows relative to the largest |float64| there; a NaN
  // (an element not written: dW starts poisoned) is infinitely wrong.
  double f64_error(const std::vector<double>& ref, const std::vector<float>& d) const {
    double worst = 0, largest = 0;
    for (int j = 0; j < kSampledRows; ++j) {
      for (int c = 0; c < s.in; ++c) {
        const double r = ref[size_t(j) * s.in + c];
        const double v = d[size_t(sampled_row(j)) * s.in + c];
        worst = std::isnan(v) ? INFINITY : std::max(worst, std::fabs(v - r));
        largest = std::max(largest, std::fabs(r));
      }
    }
    return worst / std::max(largest, 1e-30);
  }
};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

struct Variant {
  std::string name;
  size_t workspace;
  std::function<void(cudaStream_t)> run;
};

struct Row {
  railyard::bench::CallTimes t;
  double err = 0, vs_cublas = 0;
  bool same = false;
};

Row measure(const Operands& op, const std::vector<double>& ref, const Variant& v,
            const std::vector<float>* cublas, const railyard::bench::TimingOptions& o,
            cudaStream_t s) {
  Row r;
  RY_CUDA(cudaMemset(op.dw.as<void>(), 0xFF, size_t(op.s.out) * op.s.in * sizeof(float)));
  v.run(s);
  const std::vector<float> first = op.result();
  v.run(s);
  r.same = op.result() == first;
  r.err = op.f64_error(ref, first);
  r.vs_cublas = cublas ? max_diff(first, *cublas) : 0.0;
  r.t = railyard::bench::time_calls(v.run, s, o.warmup, o.reps);
  return r;
}

using Kernels = std::vector<std::unique_ptr<Cutlass>>;

std::vector<Variant> variants(const Operands& op, railyard::cuda::Matmul& mm, const Kernels& ks,
                              const DeviceBuffer& ws) {
  float* dw = op.dw.as<float>();
  const bf16* dy = op.d_dy.as<bf16>();
  const bf16* x = op.d_x.as<bf16>();
  const Shape s = op.s;
  // The engine passes X's stride only where its rows are padded (0: packed at I).
  const int mm_ldx = s.ldx == s.in ? 0 : s.ldx;
  std::vector<Variant> out;
  out.push_back({"cublaslt (engine's call)", 0, [&mm, dw, dy, x, s, mm_ldx](cudaStream_t st) {
                   mm.linear_backward_weight(dw, dy, x, kRows, s.in, s.out, CUDA_R_16BF, false, st,
                                             mm_ldx);
                 }});
  for (const auto& k : ks) {
    Cutlass* kp = k.get();
    void* w = ws.as<void>();
    const size_t bytes = ws.bytes();
    out.push_back({Cutlass::name(k->variant()), k->workspace_bytes(kRows, s.in, s.out),
                   [kp, dw, dy, x, s, w, bytes](cudaStream_t st) {
                     kp->run(dw, dy, x, kRows, s.in, s.out, s.ldx, false, w, bytes, st);
                   }});
  }
  return out;
}

json run_shape(const Shape& shape, railyard::cuda::Matmul& mm, const Kernels& ks,
               const DeviceBuffer& ws, const railyard::bench::TimingOptions& o, cudaStream_t s,
               bool& ok) {
  Operands op(shape);
  const std::vector<double> ref = op.reference();
  const double flops = 2.0 * kRows * double(shape.in) * shape.out;
  std::printf("\n%s: dW %d x %d (+)= over %d positions, X rows %d apart; float64 on %d rows\n",
              shape.name, shape.out, shape.in, kRows, shape.ldx, kSampledRows);
  std::printf("%-62s %9s %9s %7s %9s %9s %9s %5s\n", "variant", "median us", "min us", "TFLOP/s",
              "err f64", "vs cublas", "ws bytes", "same");
  json rows = json::array();
  std::vector<float> cublas;  // the first variant's result
  for (const Variant& v : variants(op, mm, ks, ws)) {
    const Row r = measure(op, ref, v, cublas.empty() ? nullptr : &cublas, o, s);
    if (cublas.empty()) cublas = op.result();
    const bool pass = r.same && r.err <= kTol;
    ok = ok && pass;
    std::printf("%-62s %9.1f %9.1f %7.0f %9.2e %9.2e %9zu %5s%s\n", v.name.c_str(), r.t.median_us,
                r.t.min_us, flops / r.t.median_us / 1e6, r.err, r.vs_cublas, v.workspace,
                r.same ? "yes" : "NO", pass ? "" : "  FAILED");
    rows.push_back({{"variant", v.name},
                    {"median_us", r.t.median_us},
                    {"min_us", r.t.min_us},
                    {"tflops", flops / r.t.median_us / 1e6},
                    {"rel_err_f64", r.err},
                    {"max_diff_vs_cublaslt", r.vs_cublas},
                    {"workspace_bytes", v.workspace},
                    {"same_bits", r.same}});
  }
  return {{"product", shape.name}, {"out", shape.out}, {"in", shape.in},
          {"ldx", shape.ldx},      {"rows", kRows},    {"variants", rows}};
}

int run(const railyard::bench::TimingOptions& o) {
  int device = 0;
  RY_CUDA(cudaGetDevice(&device));
  if (!Cutlass::supports(device)) {
    std::printf("weight_grad_bench: the CUTLASS kernels need compute capability 9.0\n");
    return 77;
  }
  railyard::cuda::Matmul mm;
  Kernels ks;
  size_t ws_bytes = 0;
  for (const Cutlass::Variant& v : Cutlass::all_variants()) {
    ks.push_back(std::make_unique<Cutlass>(v));
    for (const Shape& s : kShapes) {
      ws_bytes = std::max(ws_bytes, ks.back()->workspace_bytes(kRows, s.in, s.out));
    }
  }
  DeviceBuffer ws(std::max<size_t>(ws_bytes, 16));
  cudaStream_t s = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  bool ok = true;
  json products = json::array();
  for (const Shape& shape : kShapes) products.push_back(run_shape(shape, mm, ks, ws, o, s, ok));
  RY_CUDA(cudaStreamDestroy(s));
  if (!o.json.empty()) {
    std::ofstream(o.json) << json{{"bench", "weight_grad_bench"}, {"products", products}}.dump(2)
                          << "\n";
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(railyard::bench::parse_timing(argc, argv, kUsage));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weight_grad_bench: %s\n", e.what());
    return 2;
  }
}
