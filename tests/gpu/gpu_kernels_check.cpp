// Every CUDA kernel of the engine against the CPU layers (railyard::cpu, in float64) on fresh
// random inputs, in fp32 and bf16, with outputs poisoned before each run. Exit 77 without a GPU.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "adamw_kernels.hpp"
#include "attention.hpp"
#if RAILYARD_HAVE_CUDNN
#include "attention_cudnn.hpp"
#endif
#include "bias_grad_kernels.hpp"
#include "cross_entropy_kernels.hpp"
#include "dtype.hpp"
#include "embedding_kernels.hpp"
#include "fixed_order_sum.hpp"
#include "gelu_kernels.hpp"
#include "gemm_pins.hpp"
#include "gpu_check.hpp"
#include "grad_norm_kernels.hpp"
#include "input_pipeline.hpp"
#include "layernorm_kernels.hpp"
#include "matmul_cublaslt.hpp"
#include "ones_column_kernels.hpp"
#include "railyard/adamw.hpp"
#include "railyard/cpu_kernels.hpp"
#include "token_order.hpp"
#include "wte_segments.hpp"

using namespace railyard;
using namespace railyard::gpu_check;
using cuda::DeviceBuffer;

namespace {

// Odd-ish sizes (not powers of two) so indexing mistakes show.
constexpr int B = 3, Tn = 96, C = 192, H = 6, V = 997, Vp = 1000;
constexpr int N = B * Tn;

std::vector<float> to_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

template <typename T>
double tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}

// One linear layer's random operands (x [N, I], w [O, I], b [O], dy [N, O], and the fp32
// gradients dw, db accumulated into), uploaded, with the values the device holds.
template <typename T>
struct LinearCase {
  static constexpr int I = C, O = 3 * C;
  DevArray<T> x{size_t(N) * I}, w{size_t(O) * I}, b{size_t(O)}, dy{size_t(N) * O};
  DevArray<float> dw{size_t(O) * I}, db{size_t(O)};
  std::vector<double> hx, hw, hb, hdy, hdw, hdb;

  explicit LinearCase(std::mt19937_64& rng)
      : hx(x.upload(random_vec(rng, x.n))),
        hw(w.upload(random_vec(rng, w.n, 0.05f))),
        hb(b.upload(random_vec(rng, b.n))),
        hdy(dy.upload(random_vec(rng, dy.n))),
        hdw(dw.upload(random_vec(rng, dw.n))),
        hdb(db.upload(random_vec(rng, db.n))) {}
};

// The forward with the bias epilogue; returns its float64 reference.
template <typename T>
std::vector<double> check_linear_forward(Report& r, cuda::Matmul& mm, cudaStream_t s,
                                         const LinearCase<T>& l) {
  constexpr int I = LinearCase<T>::I, O = LinearCase<T>::O;
  DevArray<T> y(size_t(N) * O);
  y.poison();
  mm.linear_forward(y.ptr(), l.x.ptr(), l.w.ptr(), l.b.ptr(), N, I, O, cuda::cuda_dtype<T>(), s);
  std::vector<double> ry(y.n);
  cpu::matmul_forward<double>(ry.data(), l.hx.data(), l.hw.data(), l.hb.data(), N, I, O);
  r.check(std::string(type_name<T>()) + " linear forward (bias epilogue)", y.download(), ry,
          tol<T>());
  return ry;
}

// The backward into input, weight and bias, the gradients accumulated into (+=); returns the
// input gradient's float64 reference.
template <typename T>
std::vector<double> check_linear_backward(Report& r, cuda::Matmul& mm, cudaStream_t s,
                                          const LinearCase<T>& l, DevArray<float>& partials) {
  constexpr int I = LinearCase<T>::I, O = LinearCase<T>::O;
  const std::string t = type_name<T>();
  DevArray<T> dx(size_t(N) * I);
  dx.poison();
  mm.linear_backward_input(dx.ptr(), l.dy.ptr(), l.w.ptr(), N, I, O, cuda::cuda_dtype<T>(), false,
                           s);
  mm.linear_backward_weight(l.dw.ptr(), l.dy.ptr(), l.x.ptr(), N, I, O, cuda::cuda_dtype<T>(), true,
                            s);
  cuda::bias_grad(l.db.ptr(), partials.ptr(), l.dy.ptr(), N, O, true, s);
  std::vector<double> rdx(dx.n, 0.0), rdw = l.hdw, rdb = l.hdb;
  cpu::matmul_backward<double>(rdx.data(), rdw.data(), rdb.data(), l.hdy.data(), l.hx.data(),
                               l.hw.data(), N, I, O);
  r.check(t + " linear backward input", dx.download(), rdx, tol<T>());
  r.check(t + " linear backward weight (fp32, +=)", l.dw.download(), rdw, 1e-5);
  r.check(t + " bias gradient (fp32, +=)", l.db.download(), rdb, 1e-5);
  return rdx;
}

// The first micro-step overwrites (no zero_grad clear): from poison, to the plain sums; and
// the same inputs give the same bits: no order-dependent sums.
template <typename T>
void check_linear_first_step(Report& r, cuda::Matmul& mm, cudaStream_t s, LinearCase<T>& l,
                             DevArray<float>& partials) {
  constexpr int I = LinearCase<T>::I, O = LinearCase<T>::O;
  const std::string t = type_name<T>();
  std::vector<double> zdw(l.dw.n, 0.0), zdb(l.db.n, 0.0), zdx(size_t(N) * I, 0.0);
  cpu::matmul_backward<double>(zdx.data(), zdw.data(), zdb.data(), l.hdy.data(), l.hx.data(),
                               l.hw.data(), N, I, O);
  l.dw.poison();
  l.db.poison();
  auto weight_and_bias = [&] {
    mm.linear_backward_weight(l.dw.ptr(), l.dy.ptr(), l.x.ptr(), N, I, O, cuda::cuda_dtype<T>(),
                              false, s);
    cuda::bias_grad(l.db.ptr(), partials.ptr(), l.dy.ptr(), N, O, false, s);
  };
  weight_and_bias();
  auto first_dw = l.dw.download(), first_db = l.db.download();
  r.check(t + " linear backward weight (fp32, =)", first_dw, zdw, 1e-5);
  r.check(t + " bias gradient (fp32, =)", first_db, zdb, 1e-5);
  weight_and_bias();
  r.same_bits(t + " linear backward weight, twice", l.dw.download(), first_dw);
  r.same_bits(t + " bias gradient, twice", l.db.download(), first_db);
}

// GELU in the epilogues: forward keeps the value before GELU; backward applies GELU'. `ry` and
// `rdx` are the plain forward's and backward input's references.
template <typename T>
void check_linear_gelu(Report& r, std::mt19937_64& rng, cuda::Matmul& mm, cudaStream_t s,
                       const LinearCase<T>& l, const std::vector<double>& ry,
                       const std::vector<double>& rdx) {
  constexpr int I = LinearCase<T>::I, O = LinearCase<T>::O;
  const std::string t = type_name<T>();
  DevArray<T> pre(size_t(N) * O), dpre(size_t(N) * I), gy(size_t(N) * O), gdx(size_t(N) * I);
  pre.poison();
  gy.poison();
  mm.linear_forward(gy.ptr(), l.x.ptr(), l.w.ptr(), l.b.ptr(), N, I, O, cuda::cuda_dtype<T>(), s,
                    pre.ptr());
  std::vector<double> rgy(gy.n);
  cpu::gelu_forward<double>(rgy.data(), ry.data(), int64_t(ry.size()));
  r.check(t + " linear forward + GELU epilogue", gy.download(), rgy, tol<T>());
  r.check(t + " GELU epilogue's saved input", pre.download(), ry, tol<T>());
  auto hpre = dpre.upload(random_vec(rng, dpre.n, 2.0f));
  gdx.poison();
  mm.linear_backward_input(gdx.ptr(), l.dy.ptr(), l.w.ptr(), N, I, O, cuda::cuda_dtype<T>(), false,
                           s, dpre.ptr());
  std::vector<double> rgdx(gdx.n, 0.0);
  cpu::gelu_backward<double>(rgdx.data(), hpre.data(), rdx.data(), int64_t(rgdx.size()));
  r.check(t + " linear backward input + GELU' epilogue", gdx.download(), rgdx, tol<T>());
}

template <typename T>
void check_linear(Report& r, std::mt19937_64& rng, cuda::Matmul& mm, cudaStream_t s) {
  LinearCase<T> l(rng);
  const std::vector<double> ry = check_linear_forward(r, mm, s, l);
  DevArray<float> partials(cuda::bias_grad_partials(N, LinearCase<T>::O));
  const std::vector<double> rdx = check_linear_backward(r, mm, s, l, partials);
  check_linear_first_step(r, mm, s, l, partials);
  check_linear_gelu(r, rng, mm, s, l, ry, rdx);
}

// The attention projection's weight gradients of `count` layers as one strided batch
// (Matmul::linear_backward_weight with a WeightGradBatch; cuda_engine.cpp, kProjWeightGroup), at
// strides with gaps between the operands: each product against float64 and against the same
// product alone (the batch may run another cuBLASLt kernel than one product, e.g. without the
// split-K: within fp32's tolerance, not bit for bit), "=" and "+=", the gaps between the
// outputs untouched, the same bits twice.
template <typename T>
void check_weight_grad_batch(Report& r, std::mt19937_64& rng, cuda::Matmul& mm, cudaStream_t s,
                             int count) {
  const int I = C, O = C;
  const std::string t =
      std::string(type_name<T>()) + " backward weight, batch of " + std::to_string(count);
  const cuda::WeightGradBatch b{count, int64_t(O) * I + 40, int64_t(N) * O + 24,
                                int64_t(N) * I + 8};
  DevArray<T> dy(size_t(count - 1) * b.dy + size_t(N) * O),
      x(size_t(count - 1) * b.x + size_t(N) * I);
  DevArray<float> dw(size_t(count - 1) * b.dw + size_t(O) * I), one(size_t(O) * I);
  const auto hdy = dy.upload(random_vec(rng, dy.n)), hx = x.upload(random_vec(rng, x.n));
  const std::vector<double> no_w(size_t(O) * I, 0.0);
  for (const bool acc : {false, true}) {
    const std::string what = t + (acc ? " (+=)" : " (=)");
    const auto start = random_vec(rng, dw.n);  // the gaps, and what "+=" adds to
    const auto h0 = dw.upload(start);
    mm.linear_backward_weight(dw.ptr(), dy.ptr(), x.ptr(), N, I, O, cuda::cuda_dtype<T>(), acc, s,
                              0, b);
    const auto got = dw.download();
    std::vector<double> gaps_got, gaps_start;
    for (int i = 0; i < count; ++i) {
      const auto at = [&](const auto& v, int64_t stride, size_t n) {
        return std::vector<double>(v.begin() + i * stride, v.begin() + i * stride + int64_t(n));
      };
      std::vector<double> rdw = acc ? at(h0, b.dw, one.n) : std::vector<double>(one.n, 0.0);
      std::vector<double> rdx(size_t(N) * I), rdb(O);
      cpu::matmul_backward<double>(rdx.data(), rdw.data(), rdb.data(),
                                   at(hdy, b.dy, size_t(N) * O).data(),
                                   at(hx, b.x, size_t(N) * I).data(), no_w.data(), N, I, O);
      const auto mine = at(got, b.dw, one.n);
      const std::string k = what + " #" + std::to_string(i);
      r.check(k + " vs float64", mine, rdw, 1e-5);
      one.upload(
          std::vector<float>(start.begin() + i * b.dw, start.begin() + i * b.dw + int64_t(one.n)));
      mm.linear_backward_weight(one.ptr(), dy.ptr() + i * b.dy, x.ptr() + i * b.x, N, I, O,
                                cuda::cuda_dtype<T>(), acc, s);
      r.check(k + " vs alone", mine, one.download(), 1e-6);
      if (i + 1 < count) {
        const size_t gap_begin = size_t(i) * b.dw + one.n, gap_end = size_t(i + 1) * b.dw;
        gaps_got.insert(gaps_got.end(), got.begin() + gap_begin, got.begin() + gap_end);
        gaps_start.insert(gaps_start.end(), h0.begin() + gap_begin, h0.begin() + gap_end);
      }
    }
    if (count > 1) r.same_bits(what + ", gaps untouched", gaps_got, gaps_start);
    dw.upload(start);
    mm.linear_backward_weight(dw.ptr(), dy.ptr(), x.ptr(), N, I, O, cuda::cuda_dtype<T>(), acc, s,
                              0, b);
    r.same_bits(what + ", twice", dw.download(), got);
  }
}

// The forward with the residual stream added in the epilogue (the attention and MLP output
// projections: I = C and 4C, O = C): Y = X W^T + b + R against float64, R left as it was, and
// the same bits twice.
template <typename T>
void check_linear_residual(Report& r, std::mt19937_64& rng, cuda::Matmul& mm, cudaStream_t s, int I,
                           int O) {
  const std::string t =
      std::string(type_name<T>()) + " linear forward + residual (I=" + std::to_string(I) + ")";
  DevArray<T> x(size_t(N) * I), w(size_t(O) * I), b(O), res(size_t(N) * O), y(size_t(N) * O);
  auto hx = x.upload(random_vec(rng, x.n));
  auto hw = w.upload(random_vec(rng, w.n, 0.05f));
  auto hb = b.upload(random_vec(rng, b.n));
  auto hr = res.upload(random_vec(rng, res.n));
  y.poison();
  mm.linear_forward(y.ptr(), x.ptr(), w.ptr(), b.ptr(), N, I, O, cuda::cuda_dtype<T>(), s, nullptr,
                    0, res.ptr());
  std::vector<double> ry(y.n);
  cpu::matmul_forward<double>(ry.data(), hx.data(), hw.data(), hb.data(), N, I, O);
  for (size_t i = 0; i < ry.size(); ++i) ry[i] += hr[i];
  const auto first = y.download();
  r.check(t, first, ry, tol<T>());
  r.same_bits(t + ", its residual input kept", res.download(), hr);
  y.poison();
  mm.linear_forward(y.ptr(), x.ptr(), w.ptr(), b.ptr(), N, I, O, cuda::cuda_dtype<T>(), s, nullptr,
                    0, res.ptr());
  r.same_bits(t + ", twice", y.download(), first);
}

// The engine's ln1 and ln2: rows ones_column_ld(C) apart, a ones column after the C values
// (ones_column_kernels.hpp), which the LayerNorm forward must leave as set_ones_column wrote it.
template <typename T>
void check_layernorm_ones_column(Report& r, const DevArray<T>& x, const DevArray<T>& w,
                                 const DevArray<T>& b, const std::vector<double>& ref,
                                 cudaStream_t s) {
  const std::string t = type_name<T>();
  const int ld = cuda::ones_column_ld(C);
  DevArray<T> out(size_t(N) * ld);
  DevArray<float> mean(N), rstd(N);
  out.poison();
  cuda::set_ones_column(out.ptr(), N, C, ld, s);
  cuda::layernorm_forward(out.ptr(), mean.ptr(), rstd.ptr(), x.ptr(), w.ptr(), b.ptr(), N, C, ld,
                          s);
  const auto h = out.download();
  std::vector<double> values, pad, pad_ref;
  for (int n = 0; n < N; ++n) {
    values.insert(values.end(), h.begin() + ptrdiff_t(n) * ld, h.begin() + ptrdiff_t(n) * ld + C);
    for (int c = C; c < ld; ++c) {
      pad.push_back(h[size_t(n) * ld + c]);
      pad_ref.push_back(c == C ? 1.0 : 0.0);
    }
  }
  r.check(t + " layernorm forward, rows with a ones column", values, ref, tol<T>());
  r.same_bits(t + " ones column kept by layernorm forward", pad, pad_ref);
}

// The LayerNorm forward at rows x cols (one to four packs a lane, or a last pack on some lanes
// only) against float64, and run twice for the same bits.
template <typename T>
void check_forward_shape(Report& r, std::mt19937_64& rng, cudaStream_t s, int rows, int cols) {
  const size_t n = size_t(rows) * cols;
  DevArray<T> x(n), w(cols), b(cols), out(n);
  DevArray<float> mean(rows), rstd(rows);
  auto hx = x.upload(random_vec(rng, n, 2.0f));
  auto hw = w.upload(random_vec(rng, cols));
  auto hb = b.upload(random_vec(rng, cols));
  auto run = [&] {
    out.poison();
    mean.poison();
    rstd.poison();
    cuda::layernorm_forward(out.ptr(), mean.ptr(), rstd.ptr(), x.ptr(), w.ptr(), b.ptr(), rows,
                            cols, cols, s);
    return std::vector<std::vector<double>>{out.download(), mean.download(), rstd.download()};
  };
  const auto got = run();
  std::vector<double> ro(n), rm(rows), rr(rows);
  cpu::layernorm_forward<double>(ro.data(), rm.data(), rr.data(), hx.data(), hw.data(), hb.data(),
                                 rows, cols);
  const std::string t =
      std::string(type_name<T>()) + " C=" + std::to_string(cols) + " layernorm forward";
  r.check(t, got[0], ro, tol<T>());
  r.check(t + " mean", got[1], rm, 1e-5);
  r.check(t + " rstd", got[2], rr, 1e-5);
  r.same_bits(t + ", twice", run()[0], got[0]);
}

template <typename T>
void check_layernorm(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  std::string t = type_name<T>();
  DevArray<T> x(size_t(N) * C), w(C), b(C), out(size_t(N) * C), dy(size_t(N) * C),
      dx(size_t(N) * C);
  DevArray<float> mean(N), rstd(N), dw(C), db(C);
  auto hx = x.upload(random_vec(rng, x.n, 2.0f));
  auto hw = w.upload(random_vec(rng, C));
  auto hb = b.upload(random_vec(rng, C));
  out.poison();
  mean.poison();
  rstd.poison();
  cuda::layernorm_forward(out.ptr(), mean.ptr(), rstd.ptr(), x.ptr(), w.ptr(), b.ptr(), N, C, C, s);
  std::vector<double> ro(out.n), rm(N), rr(N);
  cpu::layernorm_forward<double>(ro.data(), rm.data(), rr.data(), hx.data(), hw.data(), hb.data(),
                                 N, C);
  r.check(t + " layernorm forward", out.download(), ro, tol<T>());
  r.check(t + " layernorm mean", mean.download(), rm, 1e-5);
  r.check(t + " layernorm rstd", rstd.download(), rr, 1e-5);
  check_layernorm_ones_column<T>(r, x, w, b, ro, s);

  // Backward against the statistics of the forward on x.
  DevArray<float> dmean(N), drstd(N);
  dmean.upload(to_float(rm));
  drstd.upload(to_float(rr));
  auto hdy = dy.upload(random_vec(rng, dy.n));
  auto hdx = dx.upload(random_vec(rng, dx.n));  // accumulated into
  auto hdw = dw.upload(random_vec(rng, C));
  auto hdb = db.upload(random_vec(rng, C));
  DevArray<float> partials(cuda::layernorm_backward_partials(N, C));
  cuda::layernorm_backward<T>(dx.ptr(), dw.ptr(), db.ptr(), nullptr, partials.ptr(), dy.ptr(),
                              x.ptr(), w.ptr(), dmean.ptr(), drstd.ptr(), N, C, true, true, s);
  // The device used the fp32 statistics; so does the reference.
  std::vector<double> fm(N), fr(N);
  for (int i = 0; i < N; ++i) fm[i] = float(rm[i]), fr[i] = float(rr[i]);
  std::vector<double> rdx = hdx, rdw = hdw, rdb = hdb;
  cpu::layernorm_backward<double>(rdx.data(), rdw.data(), rdb.data(), hdy.data(), hx.data(),
                                  hw.data(), fm.data(), fr.data(), N, C);
  r.check(t + " layernorm backward dx (+=)", dx.download(), rdx, tol<T>());
  r.check(t + " layernorm backward dw (fp32, +=)", dw.download(), rdw, 1e-5);
  r.check(t + " layernorm backward db (fp32, +=)", db.download(), rdb, 1e-5);
  // Overwriting the parameter gradients, twice: the same values and the same bits.
  dw.poison();
  db.poison();
  cuda::layernorm_backward<T>(dx.ptr(), dw.ptr(), db.ptr(), nullptr, partials.ptr(), dy.ptr(),
                              x.ptr(), w.ptr(), dmean.ptr(), drstd.ptr(), N, C, false, false, s);
  auto dx1 = dx.download(), dw1 = dw.download(), db1 = db.download();
  std::vector<double> zdx(dx.n, 0.0), zdw(C, 0.0), zdb(C, 0.0);
  cpu::layernorm_backward<double>(zdx.data(), zdw.data(), zdb.data(), hdy.data(), hx.data(),
                                  hw.data(), fm.data(), fr.data(), N, C);
  r.check(t + " layernorm backward dx (=)", dx1, zdx, tol<T>());
  r.check(t + " layernorm backward dw (fp32, =)", dw1, zdw, 1e-5);
  r.check(t + " layernorm backward db (fp32, =)", db1, zdb, 1e-5);
  cuda::layernorm_backward<T>(dx.ptr(), dw.ptr(), db.ptr(), nullptr, partials.ptr(), dy.ptr(),
                              x.ptr(), w.ptr(), dmean.ptr(), drstd.ptr(), N, C, false, false, s);
  r.same_bits(t + " layernorm backward dw, twice", dw.download(), dw1);
  r.same_bits(t + " layernorm backward db, twice", db.download(), db1);
}

// A first pass's name in a check's line: none for the engine's (the lines as before).
std::string kernel_name(cuda::LayerNormBackwardKernel k) {
  if (k == cuda::kLayerNormBackwardKernel) return "";
  return k == cuda::LayerNormBackwardKernel::kStaged ? " (staged)" : " (lean)";
}

// layernorm_backward reading the dx it adds to from another buffer (dx_in; the engine's
// rotating residual gradient, cuda_engine.cpp kProjWeightGroup): what it stores, the parameter
// sums and dx's column sums bit for bit those of the in-place call, dx_in left as it was.
template <typename T>
void check_layernorm_separate_output(
    Report& r, std::mt19937_64& rng, cudaStream_t s, int rows, int C,
    cuda::LayerNormBackwardKernel kernel = cuda::kLayerNormBackwardKernel) {
  const std::string t = std::string(type_name<T>()) + " C=" + std::to_string(C) + " layernorm" +
                        kernel_name(kernel) + " dx into another buffer:";
  const size_t n = size_t(rows) * C;
  DevArray<T> x(n), w(C), dy(n), in_place(n), in(n), out(n);
  DevArray<float> mean(rows), rstd(rows), sums_in_place(3 * size_t(C)), sums(3 * size_t(C));
  auto hx = x.upload(random_vec(rng, n, 2.0f));
  auto hw = w.upload(random_vec(rng, C));
  std::vector<double> ro(n), rm(rows), rr(rows), zero(C, 0.0);
  cpu::layernorm_forward<double>(ro.data(), rm.data(), rr.data(), hx.data(), hw.data(), zero.data(),
                                 rows, C);
  mean.upload(to_float(rm));
  rstd.upload(to_float(rr));
  dy.upload(random_vec(rng, n));
  const auto old = random_vec(rng, n);
  in_place.upload(old);
  const auto hin = in.upload(old);
  out.poison();
  sums_in_place.poison();  // overwritten (accumulate_params false)
  sums.poison();
  DevArray<float> partials(cuda::layernorm_backward_partials(rows, C));
  float* a = sums_in_place.ptr();
  cuda::layernorm_backward<T>(in_place.ptr(), a, a + C, a + 2 * C, partials.ptr(), dy.ptr(),
                              x.ptr(), w.ptr(), mean.ptr(), rstd.ptr(), rows, C, true, false, s,
                              nullptr, nullptr, kernel);
  float* b = sums.ptr();
  cuda::layernorm_backward<T>(out.ptr(), b, b + C, b + 2 * C, partials.ptr(), dy.ptr(), x.ptr(),
                              w.ptr(), mean.ptr(), rstd.ptr(), rows, C, true, false, s, nullptr,
                              static_cast<const T*>(in.ptr()), kernel);
  r.same_bits(t + " dx as in place", out.download(), in_place.download());
  r.same_bits(t + " dw, db, dx sums as in place", sums.download(), sums_in_place.download());
  r.same_bits(t + " dx_in untouched", in.download(), hin);
}

// ref (+)= the column sums of x [rows, cols].
std::vector<double> add_column_sums(std::vector<double> ref, const std::vector<double>& x,
                                    int cols) {
  for (size_t i = 0; i < x.size(); ++i) ref[i % size_t(cols)] += x[i];
  return ref;
}

// layernorm_backward's optional column sums of dx (the bias gradient of the projection whose
// output gradient dx is), at rows x C: C of one to four packs per lane or wide rows, a
// multiple of 256 or not, rows from fewer than a block has warps to several per warp.
template <typename T>
void check_layernorm_column_sums(
    Report& r, std::mt19937_64& rng, cudaStream_t s, int rows, int C,
    cuda::LayerNormBackwardKernel kernel = cuda::kLayerNormBackwardKernel) {
  const std::string t =
      std::string(type_name<T>()) + " C=" + std::to_string(C) + " layernorm" + kernel_name(kernel);
  const size_t n = size_t(rows) * C;
  DevArray<T> x(n), w(C), dy(n), dx(n);
  DevArray<float> mean(rows), rstd(rows), dw(C), db(C), dsum(C);
  auto hx = x.upload(random_vec(rng, n, 2.0f));
  auto hw = w.upload(random_vec(rng, C));
  std::vector<double> ro(n), rm(rows), rr(rows), zero(C, 0.0);
  cpu::layernorm_forward<double>(ro.data(), rm.data(), rr.data(), hx.data(), hw.data(), zero.data(),
                                 rows, C);
  auto fm = mean.upload(to_float(rm)), fr = rstd.upload(to_float(rr));  // fp32, as the device's
  auto hdy = dy.upload(random_vec(rng, n));
  auto hdx = dx.upload(random_vec(rng, n));  // accumulated into, as the residual gradient is
  auto hdw = dw.upload(random_vec(rng, C)), hdb = db.upload(random_vec(rng, C));
  auto hds = dsum.upload(random_vec(rng, C));
  DevArray<float> partials(cuda::layernorm_backward_partials(rows, C));
  cuda::layernorm_backward<T>(dx.ptr(), dw.ptr(), db.ptr(), dsum.ptr(), partials.ptr(), dy.ptr(),
                              x.ptr(), w.ptr(), mean.ptr(), rstd.ptr(), rows, C, true, true, s,
                              nullptr, nullptr, kernel);
  std::vector<double> rdx = hdx, rdw = hdw, rdb = hdb;
  cpu::layernorm_backward<double>(rdx.data(), rdw.data(), rdb.data(), hdy.data(), hx.data(),
                                  hw.data(), fm.data(), fr.data(), rows, C);
  auto gdx = dx.download();
  r.check(t + " backward dx (+=)", gdx, rdx, tol<T>());
  r.check(t + " backward dw (fp32, +=)", dw.download(), rdw, 1e-5);
  r.check(t + " backward db (fp32, +=)", db.download(), rdb, 1e-5);
  // Summed after the accumulate, from dx as stored (rounded to T), as a bias gradient reads it.
  r.check(t + " dx column sums (fp32, +=)", dsum.download(), add_column_sums(hds, gdx, C), 1e-5);
  r.check(t + " dx column sums vs float64 dx", dsum.download(), add_column_sums(hds, rdx, C),
          tol<T>());

  // Overwriting dx and the sums (the first micro-step), twice: the same values, the same bits.
  dx.poison();
  dw.poison();
  db.poison();
  dsum.poison();
  cuda::layernorm_backward<T>(dx.ptr(), dw.ptr(), db.ptr(), dsum.ptr(), partials.ptr(), dy.ptr(),
                              x.ptr(), w.ptr(), mean.ptr(), rstd.ptr(), rows, C, false, false, s,
                              nullptr, nullptr, kernel);
  const auto dx1 = dx.download(), dw1 = dw.download(), db1 = db.download(), ds1 = dsum.download();
  std::vector<double> zdx(n, 0.0), zdw(C, 0.0), zdb(C, 0.0);
  cpu::layernorm_backward<double>(zdx.data(), zdw.data(), zdb.data(), hdy.data(), hx.data(),
                                  hw.data(), fm.data(), fr.data(), rows, C);
  r.check(t + " backward dx (=)", dx1, zdx, tol<T>());
  r.check(t + " backward dw (fp32, =)", dw1, zdw, 1e-5);
  r.check(t + " backward db (fp32, =)", db1, zdb, 1e-5);
  r.check(t + " dx column sums (fp32, =)", ds1, add_column_sums(zero, dx1, C), 1e-5);
  cuda::layernorm_backward<T>(dx.ptr(), dw.ptr(), db.ptr(), dsum.ptr(), partials.ptr(), dy.ptr(),
                              x.ptr(), w.ptr(), mean.ptr(), rstd.ptr(), rows, C, false, false, s,
                              nullptr, nullptr, kernel);
  r.same_bits(t + " dx column sums, twice", dsum.download(), ds1);
  r.same_bits(t + " backward dw with column sums, twice", dw.download(), dw1);
}

// Both first passes (LayerNormBackwardKernel) on the same inputs, dx added to and the column
// sums: lean's dx, dw, db and dx's sums within the float64 checks' tolerances of staged's (not
// its bits: each rounds in its own order; each is held to float64 and its own bits elsewhere).
template <typename T>
void check_layernorm_kernels_agree(Report& r, std::mt19937_64& rng, cudaStream_t s, int rows,
                                   int C) {
  using K = cuda::LayerNormBackwardKernel;
  const size_t n = size_t(rows) * C;
  DevArray<T> x(n), w(C), dy(n), dx(n);
  DevArray<float> mean(rows), rstd(rows), sums(3 * size_t(C)),
      partials(cuda::layernorm_backward_partials(rows, C));
  x.upload(random_vec(rng, n, 2.0f));
  w.upload(random_vec(rng, C));
  dy.upload(random_vec(rng, n));
  mean.upload(random_vec(rng, rows));
  rstd.upload(random_vec(rng, rows, 2.0f));  // any values: only the two passes are compared
  const auto old = random_vec(rng, n);
  auto run = [&](K k) {
    dx.upload(old);
    sums.poison();
    float* o = sums.ptr();
    cuda::layernorm_backward<T>(dx.ptr(), o, o + C, o + 2 * C, partials.ptr(), dy.ptr(), x.ptr(),
                                w.ptr(), mean.ptr(), rstd.ptr(), rows, C, true, false, s, nullptr,
                                nullptr, k);
    return std::make_pair(dx.download(), sums.download());
  };
  const auto staged = run(K::kStaged), lean = run(K::kLean);
  const std::string t = std::string(type_name<T>()) + " C=" + std::to_string(C) + " rows " +
                        std::to_string(rows) + " layernorm first pass, lean vs staged";
  r.check(t + ": dx", lean.first, staged.first, tol<T>());
  r.check(t + ": dw, db, dx sums", lean.second, staged.second, 1e-5);
}

// The first pass the engine does not run (it runs kLayerNormBackwardKernel's): against float64,
// twice, into another buffer; then lean against staged.
template <typename T>
void check_layernorm_other_kernels(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  for (auto k : {cuda::LayerNormBackwardKernel::kStaged, cuda::LayerNormBackwardKernel::kLean}) {
    if (k == cuda::kLayerNormBackwardKernel) continue;
    check_layernorm_column_sums<T>(r, rng, s, N, C, k);
    check_layernorm_column_sums<T>(r, rng, s, 2 * 3168 + 37, 768, k);
    check_layernorm_column_sums<T>(r, rng, s, 37, 1000, k);
    check_layernorm_column_sums<T>(r, rng, s, N, 2560, k);
    check_layernorm_separate_output<T>(r, rng, s, 2 * 3168 + 37, 768, k);
  }
  for (int c : {C, 512, 768}) check_layernorm_kernels_agree<T>(r, rng, s, 2 * 3168 + 37, c);
  check_layernorm_kernels_agree<T>(r, rng, s, 37, C);  // 4 blocks: warps without a row
}

// One layernorm_backward of check_deferred_sums: its own inputs and partials, and two sets of
// outputs (dw, db, dsum: [3][C], the same start) for its sums launched at once and deferred.
template <typename T>
struct DeferredCall {
  int rows, C;
  bool with_sum, acc;
  DevArray<T> x, w, dy, dx;
  DevArray<float> mean, rstd, partials, now, later;
  std::vector<double> start;
  DeferredCall(std::mt19937_64& rng, int rows_, int C_, bool sum, bool acc_)
      : rows(rows_),
        C(C_),
        with_sum(sum),
        acc(acc_),
        x(size_t(rows_) * C_),
        w(C_),
        dy(x.n),
        dx(x.n),
        mean(rows_),
        rstd(rows_),
        partials(cuda::layernorm_backward_partials(rows_, C_)),
        now(3 * size_t(C_)),
        later(now.n) {
    x.upload(random_vec(rng, x.n, 2.0f));
    w.upload(random_vec(rng, w.n));
    dy.upload(random_vec(rng, dy.n));
    mean.upload(random_vec(rng, mean.n, 0.1f));
    std::vector<float> r = random_vec(rng, rstd.n);
    for (float& v : r) v = 0.5f + std::fabs(v);
    rstd.upload(r);
    const std::vector<float> v = random_vec(rng, now.n);  // what += adds to, = overwrites
    start = now.upload(v);
    later.upload(v);
  }
  void run(const DevArray<float>& out, std::vector<cuda::ColumnSums>* batch, cudaStream_t s) {
    float* o = out.ptr();
    cuda::layernorm_backward<T>(dx.ptr(), o, o + C, with_sum ? o + 2 * C : nullptr, partials.ptr(),
                                dy.ptr(), x.ptr(), w.ptr(), mean.ptr(), rstd.ptr(), rows, C, false,
                                acc, s, batch);
  }
};

// The engine's deferred second passes (kDeferColumnSums in cuda_engine.cpp): LayerNorm
// backwards queue them, one sum_partial_columns of the batch runs them all. Against each
// launched at once: every dw, db and dsum the same bits; a queued one leaves its outputs as they
// were until the batch runs (else nothing was deferred). More backwards than one launch's table,
// widths of one to four packs a lane, GPT-2's rows once, = and +=, with and without dsum, and
// C = 2560 whose dsum is not fused (its passes run at once, queued or not).
template <typename T>
void check_deferred_sums(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  const std::string t = std::string(type_name<T>()) + " layernorm backward sums deferred";
  const int widths[] = {768, 192, 1000, 512, 1280, 2560};
  std::vector<std::unique_ptr<DeferredCall<T>>> calls;
  for (int i = 0; i < cuda::kColumnSumsPerLaunch + 10; ++i) {
    const int rows = i == 0 ? 2 * 3168 + 37 : i % 2 == 0 ? 333 : 37;
    calls.push_back(
        std::make_unique<DeferredCall<T>>(rng, rows, widths[i % 6], i % 5 != 4, i % 4 < 2));
  }
  for (auto& c : calls) c->run(c->now, nullptr, s);
  std::vector<cuda::ColumnSums> batch;
  std::vector<double> now, later, before, start;
  for (auto& c : calls) {
    const size_t queued = batch.size();
    c->run(c->later, &batch, s);
    const auto out = c->later.download();
    before.insert(before.end(), out.begin(), out.end());
    const bool deferred = batch.size() > queued;
    const auto& expect = deferred ? c->start : c->now.download();
    start.insert(start.end(), expect.begin(), expect.end());
  }
  r.same_bits(t + ": outputs untouched until the batch", before, start);
  std::printf("     %s: %zu of %zu queued, %d a launch\n", t.c_str(), batch.size(), calls.size(),
              cuda::kColumnSumsPerLaunch);
  if (batch.size() <= size_t(cuda::kColumnSumsPerLaunch))
    r.fail(t + ": fewer queued than a launch");
  cuda::sum_partial_columns(batch, s);
  for (auto& c : calls) {
    const auto a = c->now.download(), b = c->later.download();
    now.insert(now.end(), a.begin(), a.end());
    later.insert(later.end(), b.begin(), b.end());
  }
  r.same_bits(t + " = at once (dw, db, dsum)", later, now);
}

template <typename T>
void check_gelu(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  std::string t = type_name<T>();
  size_t n = size_t(N) * 4 * C;
  DevArray<T> x(n), y(n);
  auto hx = x.upload(random_vec(rng, n, 2.0f));
  y.poison();
  cuda::gelu_forward(y.ptr(), x.ptr(), n, s);
  std::vector<double> ry(n);
  cpu::gelu_forward<double>(ry.data(), hx.data(), int64_t(n));
  r.check(t + " gelu forward (--recompute)", y.download(), ry, tol<T>());
}

// The batch's token order as the engine stages it (TokenOrder, on the host), on the device.
struct StagedOrder {
  std::vector<uint32_t> tokens, positions;
  DeviceBuffer d_tokens, d_positions;
};

// The order must be that of a stable sort by token: the order CUB's stable radix sort gave on
// the GPU before the host took it over, so the same sums in the same order.
StagedOrder stage_order(Report& r, const std::string& what, const std::vector<int32_t>& tok,
                        int vocab) {
  const size_t n = tok.size();
  StagedOrder o{std::vector<uint32_t>(n), std::vector<uint32_t>(n), DeviceBuffer(n * 4),
                DeviceBuffer(n * 4)};
  cuda::TokenOrder(vocab).sort(tok, o.tokens.data(), o.positions.data());
  std::vector<uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return tok[a] < tok[b]; });
  std::vector<double> got(2 * n), want(2 * n);
  for (size_t i = 0; i < n; ++i) {
    got[i] = o.positions[i], got[n + i] = o.tokens[i];
    want[i] = idx[i], want[n + i] = tok[idx[i]];
  }
  r.same_bits(what + " order = stable sort by token", got, want);
  RY_CUDA(cudaMemcpy(o.d_tokens.as<void>(), o.tokens.data(), n * 4, cudaMemcpyHostToDevice));
  RY_CUDA(cudaMemcpy(o.d_positions.as<void>(), o.positions.data(), n * 4, cudaMemcpyHostToDevice));
  return o;
}

// A run's rows [i, end) of dout at column k in the staged order, in fp32 from zero (the run per
// warp group).
float run_in_order(const std::vector<double>& dout, const StagedOrder& o, size_t i, size_t end,
                   int c, int k) {
  float s = 0.0f;
  for (size_t j = i; j < end; ++j) s += float(dout[size_t(o.positions[j]) * c + k]);
  return s;
}

// A run's rows [i, end) of dout at column k cut at every kWteSegmentRows-th sorted entry, each
// piece summed in fp32 from its first row; more than one piece: in kCombineGroups contiguous
// parts, each summed from its first piece, then the parts in order (wte_segments.hpp).
float run_in_segments(const std::vector<double>& dout, const StagedOrder& o, size_t i, size_t end,
                      int c, int k) {
  const size_t seg = cuda::kWteSegmentRows;
  std::vector<float> pieces;
  for (size_t a = i; a < end;) {
    const size_t b = std::min(end, (a / seg + 1) * seg);
    float s = float(dout[size_t(o.positions[a]) * c + k]);
    for (size_t j = a + 1; j < b; ++j) s += float(dout[size_t(o.positions[j]) * c + k]);
    pieces.push_back(s);
    a = b;
  }
  const int count = int(pieces.size());
  if (count == 1) return pieces[0];
  float total = 0.0f;
  bool any = false;
  for (int j = 0; j < cuda::kCombineGroups; ++j) {
    const int pb = cuda::combine_part_begin(j, count), pe = cuda::combine_part_begin(j + 1, count);
    if (pb == pe) continue;
    float part = pieces[size_t(pb)];
    for (int x = pb + 1; x < pe; ++x) part += pieces[size_t(x)];
    total = any ? total + part : part;
    any = true;
  }
  return total;
}

using cuda::WteBackward;
constexpr WteBackward kWteWays[] = {WteBackward::kRunPerWarpGroup, WteBackward::kSegments};

std::string way_name(WteBackward how) {
  return how == WteBackward::kSegments ? "segments" : "run per warp group";
}

// dwte as each way must sum it: per run of a token its sum (run_in_order or run_in_segments)
// added to the row's value before. Equal bits prove the summation order.
std::vector<double> wte_exact(WteBackward how, std::vector<double> wte,
                              const std::vector<double>& dout, const StagedOrder& o, int c) {
  const size_t n = o.tokens.size();
  for (size_t i = 0, end = 0; i < n; i = end) {
    while (end < n && o.tokens[end] == o.tokens[i]) ++end;
    for (int k = 0; k < c; ++k) {
      const float s = how == WteBackward::kSegments ? run_in_segments(dout, o, i, end, c, k)
                                                    : run_in_order(dout, o, i, end, c, k);
      double& w = wte[size_t(o.tokens[i]) * c + k];
      w = double(float(w) + s);
    }
  }
  return wte;
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const StagedOrder& o, int b,
                        int tn, int c, bool acc, cudaStream_t s, WteBackward how) {
  DeviceBuffer scratch(std::max<size_t>(cuda::embedding_backward_scratch_bytes(b, tn, c), 16));
  cuda::embedding_backward(dwte, dwpe, dout, o.d_tokens.as<uint32_t>(),
                           o.d_positions.as<uint32_t>(), scratch.as<float>(), b, tn, c, acc, s,
                           how);
  RY_CUDA(cudaStreamSynchronize(s));  // the scratch is freed after
}

template <typename T>
void check_embedding(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  std::string t = type_name<T>();
  std::vector<int32_t> tok(N);
  // Half the tokens from a few ids, so rows repeat many times, as common words do.
  std::uniform_int_distribution<int> pick(0, V - 1), common(0, 7);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = i % 2 == 0 ? common(rng) : pick(rng);
  DeviceBuffer dtok(N * sizeof(int32_t));
  RY_CUDA(cudaMemcpy(dtok.as<int32_t>(), tok.data(), N * sizeof(int32_t), cudaMemcpyHostToDevice));
  DevArray<T> wte(size_t(Vp) * C), wpe(size_t(Tn) * C), out(size_t(N) * C), dout(size_t(N) * C);
  DevArray<float> dwte(size_t(Vp) * C), dwpe(size_t(Tn) * C);
  auto hwte = wte.upload(random_vec(rng, wte.n));
  auto hwpe = wpe.upload(random_vec(rng, wpe.n));
  out.poison();
  cuda::embedding_forward(out.ptr(), dtok.as<int32_t>(), wte.ptr(), wpe.ptr(), B, Tn, C, s);
  std::vector<double> ro(out.n);
  cpu::encoder_forward<double>(ro.data(), tok.data(), hwte.data(), hwpe.data(), B, Tn, C);
  r.check(t + " embedding forward", out.download(), ro, tol<T>());
  const auto hdo = dout.upload(random_vec(rng, dout.n));
  const std::vector<float> w0f = random_vec(rng, dwte.n), p0f = random_vec(rng, dwpe.n);
  const std::vector<double> w0 = dwte.upload(w0f), p0 = dwpe.upload(p0f);
  const StagedOrder o = stage_order(r, t + " embedding", tok, V);
  std::vector<double> hdwte = w0, hdwpe = p0;
  cpu::encoder_backward<double>(hdwte.data(), hdwpe.data(), hdo.data(), tok.data(), B, Tn, C);
  std::vector<double> zwte(dwte.n, 0.0), zwpe(dwpe.n, 0.0);
  cpu::encoder_backward<double>(zwte.data(), zwpe.data(), hdo.data(), tok.data(), B, Tn, C);
  for (WteBackward how : kWteWays) {
    const std::string e = t + " embedding backward (" + way_name(how) + ")";
    dwte.upload(w0f);
    dwpe.upload(p0f);
    embedding_backward(dwte.ptr(), dwpe.ptr(), dout.ptr(), o, B, Tn, C, true, s, how);
    const std::vector<double> got = dwte.download();
    r.check(e + " wte (fp32, +=)", got, hdwte, 1e-5);
    r.same_bits(e + " wte (+=), fp32 in its order", got, wte_exact(how, w0, hdo, o, C));
    r.check(e + " wpe (fp32, +=)", dwpe.download(), hdwpe, 1e-5);
    // wpe overwritten (first micro-step); wte from zero twice: the same bits.
    std::vector<std::vector<double>> runs;
    for (int k = 0; k < 2; ++k) {
      RY_CUDA(cudaMemset(dwte.ptr(), 0, dwte.n * sizeof(float)));
      dwpe.poison();
      embedding_backward(dwte.ptr(), dwpe.ptr(), dout.ptr(), o, B, Tn, C, false, s, how);
      runs.push_back(dwte.download());
      if (k == 0) r.check(e + " wpe (fp32, =)", dwpe.download(), zwpe, 1e-5);
    }
    r.check(e + " wte, repeated rows", runs[0], zwte, 1e-5);
    r.same_bits(e + " wte, twice", runs[1], runs[0]);
  }
}

// The embedding backward, both ways, at another width (warps per token: 3 at GPT-2's C = 768
// in bf16, 6 in fp32; wider than a block of 8 warps: several packs per thread; segments: passes)
// on the batch `tok` of b x tn (runs longer than one ballot of 32 keys, than the rows loaded at
// once and than many segments, the largest id's run ending at the last sorted entry; one token 9%
// of the batch; word-like; one token everywhere).
template <typename T>
void check_embedding_backward_width(Report& r, std::mt19937_64& rng, cudaStream_t s, int b, int tn,
                                    int c, const std::vector<int32_t>& tok,
                                    const std::string& tokens) {
  const int n = b * tn;
  DevArray<T> dout(size_t(n) * c);
  DevArray<float> dwte(size_t(Vp) * c), dwpe(size_t(tn) * c);
  const auto hdo = dout.upload(random_vec(rng, dout.n));
  const std::vector<float> w0f = random_vec(rng, dwte.n), p0f = random_vec(rng, dwpe.n);
  const std::vector<double> w0 = dwte.upload(w0f), p0 = dwpe.upload(p0f);
  const StagedOrder o = stage_order(
      r, std::string(type_name<T>()) + " C=" + std::to_string(c) + " embedding " + tokens, tok, V);
  std::vector<double> hdwte = w0, hdwpe = p0;
  cpu::encoder_backward<double>(hdwte.data(), hdwpe.data(), hdo.data(), tok.data(), b, tn, c);
  for (WteBackward how : kWteWays) {
    const std::string t = std::string(type_name<T>()) + " C=" + std::to_string(c) + " embedding (" +
                          way_name(how) + ")";
    dwte.upload(w0f);
    dwpe.upload(p0f);
    embedding_backward(dwte.ptr(), dwpe.ptr(), dout.ptr(), o, b, tn, c, true, s, how);
    const std::vector<double> got = dwte.download();
    r.check(t + " backward wte (fp32, +=, " + tokens + ")", got, hdwte, 1e-5);
    r.same_bits(t + " backward wte (+=, " + tokens + "), fp32 in its order", got,
                wte_exact(how, w0, hdo, o, c));
    r.check(t + " backward wpe (fp32, +=)", dwpe.download(), hdwpe, 1e-5);
    std::vector<std::vector<double>> runs;
    for (int k = 0; k < 2; ++k) {
      RY_CUDA(cudaMemset(dwte.ptr(), 0, dwte.n * sizeof(float)));
      embedding_backward(dwte.ptr(), dwpe.ptr(), dout.ptr(), o, b, tn, c, false, s, how);
      runs.push_back(dwte.download());
    }
    r.same_bits(t + " backward wte (" + tokens + "), twice", runs[1], runs[0]);
  }
}

// Tokens 5 and V - 1 a quarter of the batch each (long runs, the last id's run last), or
// `common` 9% of the batch (a skewed batch, as a frequent word makes it); the rest uniform.
std::vector<int32_t> embedding_tokens(std::mt19937_64& rng, int n, bool skewed) {
  std::vector<int32_t> tok(n);
  std::uniform_int_distribution<int> pick(0, V - 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < n; ++i) {
    if (skewed) {
      tok[i] = u(rng) < 0.09 ? 11 : pick(rng);
    } else {
      tok[i] = i % 4 == 0 ? 5 : i % 4 == 1 ? V - 1 : pick(rng);
    }
  }
  return tok;
}

// Ids drawn as words are: id r with weight 1 / (r + 1) (the commonest about 13% of the batch at
// this vocabulary).
std::vector<int32_t> word_like_tokens(std::mt19937_64& rng, int n) {
  std::vector<double> cdf(V);
  double total = 0;
  for (int k = 0; k < V; ++k) cdf[size_t(k)] = total += 1.0 / (k + 1);
  std::uniform_real_distribution<double> u(0.0, total);
  std::vector<int32_t> tok(static_cast<size_t>(n));
  for (auto& id : tok) {
    id = std::min(int32_t(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin()), V - 1);
  }
  return tok;
}

template <typename T>
void check_attention(Report& r, std::mt19937_64& rng, cuda::Matmul& mm, cudaStream_t s) {
  std::string t = type_name<T>();
  cuda::AttentionShape sh{B, Tn, H, C / H};
  DevArray<T> qkv(size_t(N) * 3 * C), out(size_t(N) * C), qkvp(3 * sh.head_elems()),
      probs(sh.prob_elems()), oh(sh.head_elems()), dout(size_t(N) * C), dqkv(size_t(N) * 3 * C),
      dqkvp(3 * sh.head_elems()), dprobs(sh.prob_elems()), dos(sh.head_elems());
  auto hqkv = qkv.upload(random_vec(rng, qkv.n));
  out.poison();
  probs.poison();
  cuda::attention_forward(mm, out.ptr(), qkvp.ptr(), probs.ptr(), oh.ptr(), qkv.ptr(), sh, s);
  std::vector<double> ro(out.n), ratt(probs.n);
  cpu::attention_forward<double>(ro.data(), ratt.data(), hqkv.data(), B, Tn, C, H);
  r.check(t + " attention forward", out.download(), ro, tol<T>());
  r.check(t + " attention probabilities", probs.download(), ratt, tol<T>());

  auto hdo = dout.upload(random_vec(rng, dout.n));
  dqkv.poison();
  dprobs.poison();
  cuda::attention_backward(mm, dqkv.ptr(), dqkvp.ptr(), dprobs.ptr(), dos.ptr(), dout.ptr(),
                           qkvp.ptr(), probs.ptr(), sh, s);
  // Against the device's own (rounded) probabilities, so only the backward is measured.
  std::vector<double> dev_att = probs.download();
  std::vector<double> rdqkv(dqkv.n, 0.0);
  cpu::attention_backward<double>(rdqkv.data(), hdo.data(), hqkv.data(), dev_att.data(), B, Tn, C,
                                  H);
  r.check(t + " attention backward", dqkv.download(), rdqkv,
          std::is_same_v<T, float> ? 1e-5 : 2e-2);
}

#if RAILYARD_HAVE_CUDNN
// cuDNN's fused attention (bf16 only) against the float64 reference, and its backward pass
// twice for the same bits (the deterministic algorithm).
void check_cudnn_attention(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  using T = cuda::bf16;
  cuda::AttentionShape sh{B, Tn, H, C / H};
  DevArray<T> qkv(size_t(N) * 3 * C), out(size_t(N) * C), dout(size_t(N) * C),
      dqkv(size_t(N) * 3 * C);
  DevArray<float> stats(cuda::CudnnAttention::stats_elems(sh));
  cuda::CudnnAttention attn;
  DeviceBuffer ws(attn.prepare(sh));
  attn.set_workspace(ws.as<void>(), ws.bytes());
  auto hqkv = qkv.upload(random_vec(rng, qkv.n));
  out.poison();
  attn.forward(out.ptr(), stats.ptr(), qkv.ptr(), sh, s);
  std::vector<double> ro(out.n), ratt(sh.prob_elems());
  cpu::attention_forward<double>(ro.data(), ratt.data(), hqkv.data(), B, Tn, C, H);
  r.check("bf16 cudnn attention forward", out.download(), ro, 1e-2);

  auto hdo = dout.upload(random_vec(rng, dout.n));
  dqkv.poison();
  attn.backward(dqkv.ptr(), dout.ptr(), out.ptr(), stats.ptr(), qkv.ptr(), sh, s);
  auto first = dqkv.download();
  std::vector<double> rdqkv(dqkv.n, 0.0);
  cpu::attention_backward<double>(rdqkv.data(), hdo.data(), hqkv.data(), ratt.data(), B, Tn, C, H);
  r.check("bf16 cudnn attention backward", first, rdqkv, 2e-2);
  dqkv.poison();
  attn.backward(dqkv.ptr(), dout.ptr(), out.ptr(), stats.ptr(), qkv.ptr(), sh, s);
  r.same_bits("bf16 cudnn attention backward, twice", dqkv.download(), first);
}

// The forward at GPT-2 124M's training shape (micro-batch 16, seq 1024), where the plan pin
// table has an entry (H200, cuDNN 9.14): the plan the table names must be the one built, and
// it must match float64 (batch 0, to keep the reference cheap) and repeat its bits.
void check_cudnn_attention_pinned(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  using T = cuda::bf16;
  const int Bp = 16, Tp = 1024, Cp = 768, Hp = 12;
  cuda::AttentionShape sh{Bp, Tp, Hp, Cp / Hp};
  DevArray<T> qkv(size_t(Bp) * Tp * 3 * Cp), out(size_t(Bp) * Tp * Cp);
  DevArray<float> stats(cuda::CudnnAttention::stats_elems(sh));
  cuda::CudnnAttention attn;
  DeviceBuffer ws(attn.prepare(sh));
  attn.set_workspace(ws.as<void>(), ws.bytes());
  const cuda::SdpaPlanKey key = attn.plan_key(sh, cuda::SdpaGraph::kForward);
  const cuda::SdpaPlanChoice& plan = attn.plan(sh, cuda::SdpaGraph::kForward);
  std::printf("     cudnn attention at B=16 T=1024: sm_%d cuDNN %d: %s\n", key.sm,
              key.cudnn_version, attn.describe(sh).c_str());
  const std::string want = cuda::pinned_sdpa_plan(key);
  if (!want.empty() && plan.built != want) {
    r.fail("cudnn attention forward: pinned plan " + want + " not built (built " + plan.built +
           ")");
  }
  auto hqkv = qkv.upload(random_vec(rng, qkv.n));
  out.poison();
  attn.forward(out.ptr(), stats.ptr(), qkv.ptr(), sh, s);
  auto first = out.download();
  std::vector<double> ro(size_t(Tp) * Cp), ratt(size_t(Hp) * Tp * Tp);
  cpu::attention_forward<double>(ro.data(), ratt.data(), hqkv.data(), 1, Tp, Cp, Hp);
  r.check("bf16 cudnn attention forward, B=16 T=1024",
          std::vector<double>(first.begin(), first.begin() + ro.size()), ro, 1e-2);
  out.poison();
  attn.forward(out.ptr(), stats.ptr(), qkv.ptr(), sh, s);
  r.same_bits("bf16 cudnn attention forward, B=16 T=1024 twice", out.download(), first);
}
#endif

// rows x Vp logits: staged in shared memory where a row fits (one row per block, as many blocks
// per multiprocessor as fit; blocks take several rows when N is above the grid), read twice where
// it does not; the label says which path ran. Run twice for the same bits, then without the
// gradient (losses only, logits left as they are).
template <typename T>
void check_cross_entropy(Report& r, std::mt19937_64& rng, cudaStream_t s, int N, int V, int Vp) {
  const int staged = cuda::cross_entropy_staged_rows<T>(Vp);
  std::string t = type_name<T>() + std::string(" V ") + std::to_string(V) + " N " +
                  std::to_string(N) +
                  (staged > 0 ? " staged, " + std::to_string(staged) + " block(s) per SM"
                              : std::string(" read twice"));
  std::vector<int32_t> tgt(N);
  std::uniform_int_distribution<int> pick(0, V - 1);
  for (int i = 0; i < N; ++i) tgt[i] = i % 17 == 5 ? -1 : pick(rng);  // some ignored positions
  tgt[0] = V - 1;  // the last column before the padding
  tgt[1] = 0;
  DeviceBuffer dtgt(N * sizeof(int32_t));
  RY_CUDA(cudaMemcpy(dtgt.as<int32_t>(), tgt.data(), N * sizeof(int32_t), cudaMemcpyHostToDevice));
  DevArray<T> logits(size_t(N) * Vp);
  DevArray<float> losses(N);
  const auto input = random_vec(rng, logits.n, 3.0f);
  auto hl = logits.upload(input);
  losses.poison();
  const float dscale = 0.37f;
  cuda::cross_entropy_forward_backward(logits.ptr(), losses.ptr(), dtgt.as<int32_t>(), N, V, Vp,
                                       dscale, true, s);
  std::vector<double> rloss(N), probs(logits.n), dl(N, dscale), rd(logits.n);
  cpu::softmax_crossentropy_forward<double>(rloss.data(), probs.data(), hl.data(), tgt.data(), N, V,
                                            Vp);
  cpu::softmax_crossentropy_backward<double>(rd.data(), probs.data(), dl.data(), tgt.data(), N, V,
                                             Vp);
  const auto first_loss = losses.download();
  const auto first_grad = logits.download();
  r.check(t + " cross-entropy losses", first_loss, rloss, 1e-5);
  r.check(t + " cross-entropy dlogits (in place)", first_grad, rd, tol<T>());
  logits.upload(input);
  losses.poison();
  cuda::cross_entropy_forward_backward(logits.ptr(), losses.ptr(), dtgt.as<int32_t>(), N, V, Vp,
                                       dscale, true, s);
  r.same_bits(t + " cross-entropy losses, twice", losses.download(), first_loss);
  r.same_bits(t + " cross-entropy dlogits, twice", logits.download(), first_grad);
  logits.upload(input);
  losses.poison();
  cuda::cross_entropy_forward_backward(logits.ptr(), losses.ptr(), dtgt.as<int32_t>(), N, V, Vp,
                                       dscale, false, s);
  r.check(t + " cross-entropy losses only", losses.download(), rloss, 1e-5);
  r.same_bits(t + " cross-entropy losses only, logits kept", logits.download(), hl);
}

template <typename T>
void check_adamw(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  std::string t = type_name<T>();
  const size_t n = 100003;
  DevArray<float> p(n), m(n), v(n), g(n);
  DevArray<T> pc(n);
  std::vector<uint8_t> hmask(n);
  for (size_t i = 0; i < n; ++i) hmask[i] = (i / 1000) % 2;  // runs not aligned to 32-bit words
  const std::vector<uint32_t> bits = cuda::pack_decay_mask(hmask);
  DeviceBuffer mask(bits.size() * sizeof(uint32_t));
  RY_CUDA(cudaMemcpy(mask.as<uint32_t>(), bits.data(), bits.size() * sizeof(uint32_t),
                     cudaMemcpyHostToDevice));
  auto hp = to_float(p.upload(random_vec(rng, n)));
  auto hm = to_float(m.upload(random_vec(rng, n, 0.01f)));
  auto hv0 = random_vec(rng, n, 0.01f);
  for (float& x : hv0) x = x * x;
  auto hv = to_float(v.upload(hv0));
  auto hg = to_float(g.upload(random_vec(rng, n, 0.1f)));
  pc.poison();
  AdamWParams hpp;
  const float lr = 3e-3f, mult = 0.7f;
  const int64_t step = 5;
  cuda::AdamWStep st;
  st.lr = lr;
  st.beta1 = hpp.beta1;
  st.beta2 = hpp.beta2;
  st.eps = hpp.eps;
  st.weight_decay = hpp.weight_decay;
  st.bias_correction1 = float(1.0 - std::pow(double(hpp.beta1), double(step)));
  st.bias_correction2 = float(1.0 - std::pow(double(hpp.beta2), double(step)));
  st.grad_scale = mult;
  cuda::adamw_update(p.ptr(), std::is_same_v<T, float> ? nullptr : pc.ptr(), m.ptr(), v.ptr(),
                     g.ptr(), mask.as<uint32_t>(), n, st, s);
  for (size_t i = 0; i < n; i += 1000) {
    size_t len = std::min<size_t>(1000, n - i);
    adamw_update(hp.data() + i, hg.data() + i, hm.data() + i, hv.data() + i, len, hpp, lr, mult,
                 step, hmask[i] != 0);
  }
  std::vector<double> rp(hp.begin(), hp.end()), rm(hm.begin(), hm.end()), rv(hv.begin(), hv.end());
  r.check(t + " adamw params", p.download(), rp, 1e-6);
  r.check(t + " adamw m", m.download(), rm, 1e-6);
  r.check(t + " adamw v", v.download(), rv, 1e-6);
  if constexpr (!std::is_same_v<T, float>) {
    std::vector<double> rpc(n);
    for (size_t i = 0; i < n; ++i) rpc[i] = round_to<T>(hp[i]);
    r.check(t + " adamw compute copy", pc.download(), rpc, 1e-2);
  }
}

// One gradient norm as the engine computes it: per-block sums into the slots, then their fixed-
// order sum. Slots and result poisoned first, so a slot left out shows.
std::vector<double> full_norm(DevArray<double>& out, DevArray<double>& slots, const float* g,
                              size_t n, size_t blocks, cudaStream_t s) {
  out.poison();
  slots.poison();
  RY_CUDA(cudaDeviceSynchronize());  // the poison is on the legacy stream, `s` does not wait
  cuda::grad_sumsq_slice(slots.ptr(), g, n, blocks, s);
  cuda::sum_slots(out.ptr(), slots.ptr(), cuda::grad_sumsq_slots(n, blocks), s);
  RY_CUDA(cudaStreamSynchronize(s));
  return out.download();
}

// The gradient norm over an odd-sized buffer starting off a 16-byte boundary (the kernel's
// aligned body and its ends): against float64, and the same bits twice.
void check_grad_norm(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  const size_t n = 5033895, skew = 3;
  DevArray<float> g(n + skew);
  auto hg = g.upload(random_vec(rng, n + skew));
  const size_t blocks = cuda::grad_sumsq_full_blocks();
  DevArray<double> out(1), slots(cuda::grad_sumsq_slots(n, blocks));
  double ref = 0;
  for (size_t i = skew; i < n + skew; ++i) ref += hg[i] * hg[i];
  const auto first = full_norm(out, slots, g.ptr() + skew, n, blocks, s);
  r.check("fp32 gradient sum of squares", first, {ref}, 1e-6);
  r.same_bits("fp32 grad sumsq, twice", full_norm(out, slots, g.ptr() + skew, n, blocks, s), first);
}

// A flat gradient buffer as check_norm_from_splits lays it out: split-written layers of I
// columns and `rows` rows (dw, padding, db), the rest (a partial tile first, small gaps, then
// more tiles than blocks) read by the norm's own pass.
struct SplitBuffer {
  std::vector<size_t> dw_at, db_at;
  std::vector<std::pair<size_t, size_t>> rest;
  size_t n = 0, slots = 0;
};

SplitBuffer split_buffer(int I, const std::vector<int>& rows) {
  SplitBuffer b;
  size_t at = 1000;
  b.rest.push_back({0, at});
  for (int O : rows) {
    b.dw_at.push_back(at);
    b.db_at.push_back(at + size_t(O) * I + 8);
    b.rest.push_back({at + size_t(O) * I, b.db_at.back()});
    at = b.db_at.back() + O;
    b.rest.push_back({at, at + 40});
    at += 40;
    b.slots += size_t(cuda::split_sumsq_slots(O));
  }
  b.n = at + 5000000;
  b.rest.back().second = b.n;
  return b;
}

// The gradient norm as the engine takes it with kNormFromSplits (cuda_engine.cpp): three layers
// of GPT-2's qkv and fc shapes, the splits' sums of squares in their slots, the rest read by
// grad_sumsq_ranges, which also adds the slots (two chunks). = and += (acc), against float64
// over the whole buffer as the splits left it; the same bits twice, and with the splits in a
// CUDA graph.
void check_norm_from_splits(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  constexpr int I = 768, ld = cuda::ones_column_ld(I);
  const std::vector<int> rows = {3 * I, 4 * I, 4 * I};
  const SplitBuffer b = split_buffer(I, rows);
  const size_t n = b.n, slots = b.slots;
  const auto table = cuda::sumsq_range_table(b.rest);
  const size_t tiles = table.back().first_tile;
  DevArray<float> g(n), prod(size_t(rows[1]) * ld);
  DevArray<double> done(slots), out(1), norm_slots(cuda::grad_sumsq_ranges_slots(tiles, slots));
  DevArray<double> full_slots(cuda::grad_sumsq_slots(n, cuda::grad_sumsq_full_blocks()));
  cuda::DeviceBuffer ranges(table.size() * sizeof(cuda::SumsqRange));
  RY_CUDA(cudaMemcpy(ranges.as<void>(), table.data(), table.size() * sizeof(cuda::SumsqRange),
                     cudaMemcpyHostToDevice));
  const std::vector<float> g0 = random_vec(rng, n), p0 = random_vec(rng, prod.n);
  prod.upload(p0);
  auto splits = [&](bool acc, cudaStream_t st) {
    double* slot = done.ptr();
    for (size_t k = 0; k < rows.size(); ++k) {
      cuda::split_ones_column_product(g.ptr() + b.dw_at[k], g.ptr() + b.db_at[k], prod.ptr(),
                                      rows[k], I, ld, acc, st, slot);
      slot += cuda::split_sumsq_slots(rows[k]);
    }
  };
  auto norm = [&](bool acc, bool graph) {
    g.upload(g0);
    done.poison();
    norm_slots.poison();
    out.poison();
    if (graph) {
      run_in_graph([&](cudaStream_t st) { splits(acc, st); });
    } else {
      splits(acc, s);
    }
    cuda::grad_sumsq_ranges(norm_slots.ptr(), g.ptr(), ranges.as<cuda::SumsqRange>(), tiles,
                            done.ptr(), slots, s);
    cuda::sum_slots(out.ptr(), norm_slots.ptr(), norm_slots.n, s);
    return out.download();
  };
  for (bool acc : {false, true}) {
    const std::string t = std::string("grad sumsq from splits") + (acc ? " (+=)" : " (=)");
    const auto first = norm(acc, false);
    double ref = 0;
    for (double v : g.download()) ref += v * v;
    r.check(t, first, {ref}, 1e-6);
    r.check(t + ", the full pass",
            full_norm(out, full_slots, g.ptr(), n, cuda::grad_sumsq_full_blocks(), s), {ref}, 1e-6);
    r.same_bits(t + ", twice", norm(acc, false), first);
    r.same_bits(t + ", splits in a graph", norm(acc, true), first);
  }
}

// grad_sumsq_ranges_clip (the engine's kFusedNormClip) against the three launches it replaces
// (grad_sumsq_ranges, sum_slots, clip_factor_on_device): the same sum of squares and clip factor
// bit for bit, at a clip that scales, one that does not and none (0); twice (the ticket back at
// zero) and from a CUDA graph. More tiles than blocks and two chunks of given slots.
void check_norm_clip_fused(Report& r, std::mt19937_64& rng, cudaStream_t s) {
  const SplitBuffer b = split_buffer(768, {3 * 768, 4 * 768, 4 * 768});
  const auto table = cuda::sumsq_range_table(b.rest);
  const size_t tiles = table.back().first_tile, n_done = b.slots;
  DevArray<float> g(b.n), scale(1);
  auto hg = g.upload(random_vec(rng, b.n));
  DevArray<double> done(n_done), slots(cuda::grad_sumsq_ranges_slots(tiles, n_done)), sumsq(1);
  std::vector<float> d = random_vec(rng, n_done, 30.0f);
  for (float& x : d) x *= x;  // sums of squares
  const auto hdone = done.upload(d);
  DevArray<uint32_t> ticket(1);
  RY_CUDA(cudaMemset(ticket.ptr(), 0, sizeof(uint32_t)));
  cuda::DeviceBuffer ranges(table.size() * sizeof(cuda::SumsqRange));
  RY_CUDA(cudaMemcpy(ranges.as<void>(), table.data(), table.size() * sizeof(cuda::SumsqRange),
                     cudaMemcpyHostToDevice));
  const auto* rg = ranges.as<cuda::SumsqRange>();
  auto run = [&](const std::function<void(cudaStream_t)>& queue, bool graph) {
    slots.poison();
    sumsq.poison();
    scale.poison();
    RY_CUDA(cudaDeviceSynchronize());  // the poison is on the legacy stream
    if (graph) {
      run_in_graph(queue);
    } else {
      queue(s);
    }
    return std::vector<double>{sumsq.download()[0], scale.download()[0]};
  };
  double ref = 0;  // every element of the buffer (the gaps the ranges skip are not summed)
  for (const auto& [begin, end] : b.rest)
    for (size_t i = begin; i < end; ++i) ref += hg[i] * hg[i];
  for (double d : hdone) ref += d;
  for (float clip : {1.0f, 1e9f, 0.0f}) {
    const std::string t = "fused norm and clip (clip " + std::to_string(clip) + ")";
    const auto three = run(
        [&](cudaStream_t st) {
          cuda::grad_sumsq_ranges(slots.ptr(), g.ptr(), rg, tiles, done.ptr(), n_done, st);
          cuda::sum_slots(sumsq.ptr(), slots.ptr(), slots.n, st);
          cuda::clip_factor_on_device(scale.ptr(), sumsq.ptr(), clip, st);
        },
        false);
    auto fused = [&](cudaStream_t st) {
      cuda::grad_sumsq_ranges_clip(sumsq.ptr(), scale.ptr(), clip, ticket.ptr(), slots.ptr(),
                                   g.ptr(), rg, tiles, done.ptr(), n_done, st);
    };
    // 1e-6 as check_norm_from_splits: fp32 sums of <= 16 squares per thread and over a block
    // leave ~1e-9 here (a CPU emulation of the kernel on this layout: 1e-10 to 2e-9).
    r.check(t + " vs float64", {three[0]}, {ref}, 1e-6);
    r.same_bits(t + " = 3 launches", run(fused, false), three);
    r.same_bits(t + " = 3 launches, again", run(fused, false), three);
    r.same_bits(t + " = 3 launches, graph", run(fused, true), three);
    r.same_bits(t + ": ticket back at 0", ticket.download(), {0.0});
  }
}

// The token order copied by the backward's graph (InputPipeline::copy_order_begin/end, the
// engine's kOrderCopyInBackward): one graph per slot, captured at the slot's first batch and
// replayed for the later ones, must leave each batch's own order in the rows (TokenOrder's, as
// stage_order copies it), never a stale one.
void check_order_copy_in_graphs(Report& r, std::mt19937_64& rng) {
  constexpr size_t n = 4096;
  constexpr int vocab = 1000;  // many repeats: the order within a token is by position
  DevArray<int32_t> slot0(cuda::kInputRows * n), slot1(cuda::kInputRows * n), rows(2 * n);
  cuda::InputPipeline in(n, vocab, {slot0.ptr(), slot1.ptr()});
  cuda::TokenOrder order(vocab);
  cudaStream_t cs = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  std::array<cudaGraphExec_t, 2> exec{};
  std::vector<double> got, want;
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  for (int batch = 0; batch < 6; ++batch) {
    std::vector<int32_t> tokens(n);
    for (int32_t& t : tokens) t = pick(rng);
    in.stage(tokens, tokens, cs);
    in.sort_order(tokens);
    cudaGraphExec_t& e = exec[size_t(in.last_slot())];
    if (e == nullptr) {
      cudaGraph_t graph = nullptr;
      RY_CUDA(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
      in.copy_order_begin(rows.ptr(), cs);
      in.copy_order_end(cs);
      RY_CUDA(cudaStreamEndCapture(cs, &graph));
      RY_CUDA(cudaGraphInstantiate(&e, graph, 0));
      RY_CUDA(cudaGraphDestroy(graph));
    }
    RY_CUDA(cudaGraphLaunch(e, cs));
    RY_CUDA(cudaStreamSynchronize(cs));
    const auto dev = rows.download();
    got.insert(got.end(), dev.begin(), dev.end());
    std::vector<uint32_t> st(n), sp(n);
    order.sort(tokens, st.data(), sp.data());
    want.insert(want.end(), st.begin(), st.end());
    want.insert(want.end(), sp.begin(), sp.end());
  }
  r.same_bits("token order copied by a graph per slot, 6 batches", got, want);
  for (cudaGraphExec_t e : exec) RY_CUDA(cudaGraphExecDestroy(e));
  RY_CUDA(cudaStreamDestroy(cs));
}

// A pin set from its configuration alone (cublasLtMatmulAlgoInit and the configuration's fields,
// as the engine sets a pin the heuristic does not offer, e.g. one the survey enumerated) must be
// the pin and give the bits of the algorithm the engine runs for it.
template <typename T>
void check_pin_from_config(Report& r, cuda::Matmul& mm, const cuda::GemmCall& call,
                           const cuda::GemmAlgoConfig& pin, DevArray<T>& d,
                           const std::vector<double>& ran, cudaStream_t s) {
  const auto set = mm.checked(call, pin);
  if (!set || cuda::algo_config_of(set->algo) != pin) {
    r.fail("the pin " + cuda::to_string(pin) + " set from its configuration " +
           (set ? "comes out as " + cuda::to_string(cuda::algo_config_of(set->algo))
                : std::string("does not initialise or pass cublasLtMatmulAlgoCheck")) +
           ": enumerated pins cannot work on this cuBLASLt; survey again and update the table");
    return;
  }
  d.poison();
  mm.gemm_with(call, set->algo, s);
  r.same_bits("the pin set from its configuration", d.download(), ran);
}

// A product the pin table (gemm_pins.hpp) names, at its real shape: GPT-2 124M's fc2 backward
// into the fc layer with the DGELU epilogue, B=16 T=1024. On the GPU and cuBLASLt the pin is
// for, the engine must run the pinned algorithm; on any, the result must match float64 (on every
// 257th row: the whole product is 39 G multiply-adds) and give the same bits twice.
void check_pinned_fc2_dgelu(Report& r, std::mt19937_64& rng, cuda::Matmul& mm, cudaStream_t s) {
  constexpr int PN = 16 * 1024, PI = 4 * 768, PO = 768, kStride = 257;
  using T = cuda::bf16;
  DevArray<T> dy(size_t(PN) * PO), w(size_t(PO) * PI), pre(size_t(PN) * PI), dx(size_t(PN) * PI);
  auto hdy = dy.upload(random_vec(rng, dy.n));
  auto hw = w.upload(random_vec(rng, w.n, 0.05f));
  auto hpre = pre.upload(random_vec(rng, pre.n, 2.0f));
  const auto call = cuda::Matmul::backward_input_call(dx.ptr(), dy.ptr(), w.ptr(), PN, PI, PO,
                                                      cuda::cuda_dtype<T>(), false, pre.ptr());
  const auto pin = cuda::pinned_algo(mm.pin_key(call));
  const auto ran = mm.algo_config(call);
  std::printf("     fc2 dgelu %dx%dx%d runs %s (%s)\n", call.m, call.n, call.k,
              cuda::to_string(ran).c_str(), pin ? "pinned here" : "no pin for this GPU/cuBLASLt");
  if (pin && ran != *pin)
    r.fail("fc2 dgelu: the pinned " + cuda::to_string(*pin) +
           " is not among cuBLASLt's candidates: survey and update the table");
  dx.poison();
  mm.linear_backward_input(dx.ptr(), dy.ptr(), w.ptr(), PN, PI, PO, cuda::cuda_dtype<T>(), false, s,
                           pre.ptr());
  const auto first = dx.download();
  std::vector<double> out, ref;
  for (int n = 0; n < PN; n += kStride) {
    std::vector<double> row(PI, 0.0), grad(PI, 0.0);
    for (int o = 0; o < PO; ++o) {
      const double g = hdy[size_t(n) * PO + o];
      for (int i = 0; i < PI; ++i) row[i] += g * hw[size_t(o) * PI + i];
    }
    cpu::gelu_backward<double>(grad.data(), hpre.data() + size_t(n) * PI, row.data(), PI);
    ref.insert(ref.end(), grad.begin(), grad.end());
    out.insert(out.end(), first.begin() + ptrdiff_t(n) * PI, first.begin() + ptrdiff_t(n + 1) * PI);
  }
  r.check("bf16 fc2 backward input + GELU' (GPT-2 shape)", out, ref, tol<T>());
  dx.poison();
  mm.linear_backward_input(dx.ptr(), dy.ptr(), w.ptr(), PN, PI, PO, cuda::cuda_dtype<T>(), false, s,
                           pre.ptr());
  r.same_bits("bf16 fc2 backward input + GELU', twice", dx.download(), first);
  if (pin) check_pin_from_config(r, mm, call, *pin, dx, first, s);
}

// The split of a ones-column product into weight and bias gradients alone, exact (a copy or one
// fp32 add per element): 16-byte packs (GPT-2's rows), rows of a width that is not whole packs,
// and a dw that starts off a 16-byte boundary (both fall back to one thread per column).
void check_split_ones_column(Report& r, std::mt19937_64& rng, cudaStream_t s, int O, int I,
                             size_t dw_offset) {
  const int ld = cuda::ones_column_ld(I);
  const std::string t = "split ones-column product " + std::to_string(O) + "x" + std::to_string(I) +
                        (dw_offset ? " (dw off 16 B)" : "");
  DevArray<float> prod(size_t(O) * ld), dw(size_t(O) * I + dw_offset), db(O);
  const auto hp = prod.upload(random_vec(rng, prod.n));
  for (bool acc : {false, true}) {
    const auto hw = dw.upload(random_vec(rng, dw.n)), hb = db.upload(random_vec(rng, db.n));
    cuda::split_ones_column_product(dw.ptr() + dw_offset, db.ptr(), prod.ptr(), O, I, ld, acc, s);
    std::vector<double> rw(hw), rb(O);
    for (int o = 0; o < O; ++o) {
      for (int c = 0; c < I; ++c) {
        const size_t i = dw_offset + size_t(o) * I + c;
        rw[i] = acc ? double(float(hw[i]) + float(hp[size_t(o) * ld + c])) : hp[size_t(o) * ld + c];
      }
      rb[o] = acc ? double(float(hb[o]) + float(hp[size_t(o) * ld + I])) : hp[size_t(o) * ld + I];
    }
    r.same_bits(t + (acc ? " +=, weight" : " =, weight"), dw.download(), rw);
    r.same_bits(t + (acc ? " +=, bias" : " =, bias"), db.download(), rb);
  }
}

// The qkv and fc weight and bias gradients as the engine takes them from one product (the
// input's ones column, ones_column_kernels.hpp; the input's rows at the engine's stride
// ones_column_row_stride, the product over its first ones_column_ld columns), at GPT-2's fc shape
// (16384 rows, 768 -> 3072):
// the bias gradient against float64 column sums of dy, the weight gradient on a sample of its
// rows, = and +=, and the same bits twice. The bias column is a fixed-order fp32 sum of 16384
// terms in the product's tiles (expected error about 1e-6 relative), hence 1e-4.
template <typename T>
void check_ones_column_product(Report& r, std::mt19937_64& rng, cuda::Matmul& mm, cudaStream_t s) {
  constexpr int PN = 16 * 1024, PI = 768, PO = 4 * 768, kStride = 97;
  const int ld = cuda::ones_column_ld(PI), row = cuda::ones_column_row_stride(PI);
  const std::string t = std::string(type_name<T>()) + " ones-column product (GPT-2 fc)";
  DevArray<T> x(size_t(PN) * row), dy(size_t(PN) * PO);
  DevArray<float> prod(size_t(PO) * ld), dw(size_t(PO) * PI), db(PO);
  auto hx = x.upload(random_vec(rng, x.n));
  cuda::set_ones_column(x.ptr(), PN, PI, row, s);
  auto hdy = dy.upload(random_vec(rng, dy.n));
  std::vector<double> rdb(PO, 0.0), rdw;
  for (int n = 0; n < PN; ++n) {
    for (int o = 0; o < PO; ++o) rdb[o] += hdy[size_t(n) * PO + o];
  }
  std::vector<int> sample;
  for (int o = 0; o < PO; o += kStride) sample.push_back(o);
  rdw.assign(sample.size() * PI, 0.0);
  for (int n = 0; n < PN; ++n) {
    const double* xr = hx.data() + size_t(n) * row;  // the padding's host values are never read
    for (size_t k = 0; k < sample.size(); ++k) {
      const double g = hdy[size_t(n) * PO + sample[k]];
      for (int c = 0; c < PI; ++c) rdw[k * PI + c] += g * xr[c];
    }
  }
  auto sampled = [&](const std::vector<double>& w) {
    std::vector<double> rows;
    for (int o : sample)
      rows.insert(rows.end(), w.begin() + ptrdiff_t(o) * PI, w.begin() + ptrdiff_t(o + 1) * PI);
    return rows;
  };
  auto run = [&](bool acc) {
    prod.poison();
    mm.linear_backward_weight(prod.ptr(), dy.ptr(), x.ptr(), PN, ld, PO, cuda::cuda_dtype<T>(),
                              false, s, row);
    cuda::split_ones_column_product(dw.ptr(), db.ptr(), prod.ptr(), PO, PI, ld, acc, s);
  };
  dw.poison();
  db.poison();
  run(false);
  const auto dw1 = dw.download(), db1 = db.download();
  r.check(t + " bias (=)", db1, rdb, 1e-4);
  r.check(t + " weight (=, sampled rows)", sampled(dw1), rdw, 1e-4);
  run(false);
  r.same_bits(t + " bias, twice", db.download(), db1);
  r.same_bits(t + " weight, twice", dw.download(), dw1);
  // Micro-steps after the first add the product to what the gradients hold.
  auto hdw = dw.upload(random_vec(rng, dw.n)), hdb = db.upload(random_vec(rng, db.n));
  run(true);
  for (int o = 0; o < PO; ++o) rdb[o] += hdb[o];
  const auto base = sampled(hdw);
  for (size_t i = 0; i < rdw.size(); ++i) rdw[i] += base[i];
  r.check(t + " bias (+=)", db.download(), rdb, 1e-4);
  r.check(t + " weight (+=, sampled rows)", sampled(dw.download()), rdw, 1e-4);
  const auto call = cuda::Matmul::backward_weight_call(prod.ptr(), dy.ptr(), x.ptr(), PN, ld, PO,
                                                       cuda::cuda_dtype<T>(), false, row);
  std::printf("     %s: %dx%dx%d, rows %d apart, runs %s\n", t.c_str(), call.m, call.n, call.k,
              call.lda, cuda::to_string(mm.algo_config(call)).c_str());
}

template <typename T>
void check_all(Report& r, std::mt19937_64& rng, cuda::Matmul& mm, cudaStream_t s) {
  check_linear<T>(r, rng, mm, s);
  check_linear_residual<T>(r, rng, mm, s, C, C);      // attention projection
  check_linear_residual<T>(r, rng, mm, s, 4 * C, C);  // fc2
  check_layernorm<T>(r, rng, s);
  check_layernorm_column_sums<T>(r, rng, s, N, C);  // C = 192: one or two packs per lane
  // GPT-2's: 132 blocks of 48 or 49 rows, 6 or 7 rows per warp (bf16; fp32 wide rows).
  check_layernorm_column_sums<T>(r, rng, s, 2 * 3168 + 37, 768);
  // Four packs per lane (fp32; bf16 two), eight warps a block.
  check_layernorm_column_sums<T>(r, rng, s, N, 512);
  // bf16 four packs per lane, the last on 29 of 32 lanes (fp32 wide rows); blocks of 7 or 8
  // rows: a warp without a row.
  check_layernorm_column_sums<T>(r, rng, s, 37, 1000);
  check_layernorm_column_sums<T>(r, rng, s, N, 1280);  // bf16 wide rows (fp32 from 768)
  // Beyond a third slice of shared memory on an H100/H200 (227 KiB): dx read again.
  check_layernorm_column_sums<T>(r, rng, s, N, 2560);
  check_layernorm_other_kernels<T>(r, rng, s);
  check_deferred_sums<T>(r, rng, s);
  // dx into another buffer: both kernels (bf16 staged at 192 and 768, wide rows at 2560, dx
  // read again for its column sums there; fp32 staged at 192, wide from 768).
  check_layernorm_separate_output<T>(r, rng, s, N, C);
  check_layernorm_separate_output<T>(r, rng, s, 2 * 3168 + 37, 768);
  check_layernorm_separate_output<T>(r, rng, s, N, 2560);
  check_weight_grad_batch<T>(r, rng, mm, s, 3);
  check_weight_grad_batch<T>(r, rng, mm, s, 2);
  // The forward at one to four packs a lane (C = 1000: bf16's last on 29 of 32 lanes) and at
  // GPT-2's rows (bf16 three packs a lane).
  check_forward_shape<T>(r, rng, s, N, C);
  check_forward_shape<T>(r, rng, s, N, 512);
  check_forward_shape<T>(r, rng, s, 37, 1000);
  check_forward_shape<T>(r, rng, s, 2 * 3168 + 37, 768);
  check_gelu<T>(r, rng, s);
  check_embedding<T>(r, rng, s);
  // GPT-2's width, runs of 64; more packs than threads; GPT-2's batch with one token 9% of it.
  check_embedding_backward_width<T>(r, rng, s, 4, 64, 768, embedding_tokens(rng, 256, false),
                                    "long runs");
  check_embedding_backward_width<T>(r, rng, s, 2, 64, 2560, embedding_tokens(rng, 128, false),
                                    "long runs");
  check_embedding_backward_width<T>(r, rng, s, 16, 1024, 768, embedding_tokens(rng, 16384, true),
                                    "9% one token");
  check_embedding_backward_width<T>(r, rng, s, 16, 1024, 768, word_like_tokens(rng, 16384),
                                    "word-like");
  check_embedding_backward_width<T>(r, rng, s, 16, 1024, 768, std::vector<int32_t>(16384, 7),
                                    "one token everywhere");
  check_embedding_backward_width<T>(r, rng, s, 3, 37, 768, std::vector<int32_t>(111, V - 1),
                                    "one token, a partial last segment");
  check_attention<T>(r, rng, mm, s);
  check_cross_entropy<T>(r, rng, s, N, V, Vp);
  // GPT-2's padded vocabulary: staged on an H100/H200 (bf16 two blocks per multiprocessor, fp32
  // one), 600 rows so that each block of the staged grid takes several (each copies its next row
  // in behind its gradient), 5 so that the grid is only 5 blocks and no block has a next row;
  // 160 KB bf16 rows, one block per multiprocessor (fp32 reads them twice); and rows too long
  // for any device's shared memory (240 KB in bf16), read twice.
  check_cross_entropy<T>(r, rng, s, 600, 50257, 50304);
  check_cross_entropy<T>(r, rng, s, 5, 50257, 50304);
  check_cross_entropy<T>(r, rng, s, 300, 80001, 80008);
  check_cross_entropy<T>(r, rng, s, 24, 120001, 120008);
  check_adamw<T>(r, rng, s);
  check_ones_column_product<T>(r, rng, mm, s);
}

}  // namespace

int main() {
  skip_without_gpu();
  try {
    uint64_t seed = std::random_device{}();
    std::printf("gpu_kernels_check: seed %llu\n", static_cast<unsigned long long>(seed));
    std::mt19937_64 rng(seed);
    cudaStream_t s = nullptr;  // the legacy stream: downloads synchronise with it
    cuda::Matmul mm;
    Report r;
    check_all<float>(r, rng, mm, s);
    check_all<cuda::bf16>(r, rng, mm, s);
    check_grad_norm(r, rng, s);
    check_norm_from_splits(r, rng, s);
    check_norm_clip_fused(r, rng, s);
    check_order_copy_in_graphs(r, rng);
    check_split_ones_column(r, rng, s, 2304, 768, 0);
    check_split_ones_column(r, rng, s, 7, 33, 0);
    check_split_ones_column(r, rng, s, 5, 768, 1);
    check_pinned_fc2_dgelu(r, rng, mm, s);
#if RAILYARD_HAVE_CUDNN
    check_cudnn_attention(r, rng, s);
    check_cudnn_attention_pinned(r, rng, s);
#endif
    return r.exit_code();
  } catch (const std::exception& e) {
    std::printf("FAILED with exception: %s\n", e.what());
    return 1;
  }
}
