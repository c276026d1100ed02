#include "railyard/cpu_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "railyard/cpu_parallel.hpp"

namespace railyard::cpu {
namespace {

// Row-major C = alpha op(A) op(B) + beta C on the calling thread, dispatched on the scalar type.
void blas_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
               const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void blas_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
               const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The products' only split: blocks of this many rows (or columns, where C is wider than tall)
// of C, each one single-threaded BLAS call. OpenBLAS's result for an element depends on where
// its tiles fall, so the blocks depend on the shape alone, never on the thread count.
constexpr int kGemmBlock = 128;

// Row-major C = alpha op(A) op(B) + beta C, its blocks spread over the kernels' threads.
template <typename T>
void gemm(bool ta, bool tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B, int ldb,
          T beta, T* C, int ldc) {
  const bool by_rows = M >= N;
  const int len = by_rows ? M : N;
  parallel_for((len + kGemmBlock - 1) / kGemmBlock, [&](int i) {
    const int lo = i * kGemmBlock;
    const int n = std::min(kGemmBlock, len - lo);
    if (by_rows) {
      const T* a = ta ? A + lo : A + static_cast<int64_t>(lo) * lda;
      blas_gemm(ta, tb, n, N, K, alpha, a, lda, B, ldb, beta, C + static_cast<int64_t>(lo) * ldc,
                ldc);
    } else {
      const T* b = tb ? B + static_cast<int64_t>(lo) * ldb : B + lo;
      blas_gemm(ta, tb, M, n, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
    }
  });
}

constexpr double kLayerNormEps = 1e-5;

}  // namespace

template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                     int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      T* o = out + (static_cast<int64_t>(b) * Tn + t) * C;
      const T* te = wte + static_cast<int64_t>(tokens[b * Tn + t]) * C;
      const T* pe = wpe + static_cast<int64_t>(t) * C;
      for (int c = 0; c < C; ++c) o[c] = te[c] + pe[c];
    }
  }
}

template <typename T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn,
                      int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < Tn; ++t) {
      const T* d = dout + (static_cast<int64_t>(b) * Tn + t) * C;
      T* te = dwte + static_cast<int64_t>(tokens[b * Tn + t]) * C;
      T* pe = dwpe + static_cast<int64_t>(t) * C;
      for (int c = 0; c < C; ++c) {
        te[c] += d[c];
        pe[c] += d[c];
      }
    }
  }
}

template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int N,
                       int C) {
  for (int i = 0; i < N; ++i) {
    const T* x = inp + static_cast<int64_t>(i) * C;
    T* o = out + static_cast<int64_t>(i) * C;
    T m = 0;
    for (int c = 0; c < C; ++c) m += x[c];
    m /= C;
    T var = 0;
    for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= C;
    const T s = T(1) / std::sqrt(var + T(kLayerNormEps));
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    mean[i] = m;
    rstd[i] = s;
  }
}

template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w,
                        const T* mean, const T* rstd, int N, int C) {
  for (int i = 0; i < N; ++i) {
    const T* x = inp + static_cast<int64_t>(i) * C;
    const T* d = dout + static_cast<int64_t>(i) * C;
    T* dx = dinp + static_cast<int64_t>(i) * C;
    const T m = mean[i];
    const T s = rstd[i];
    // dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = dout * w.
    T dnorm_mean = 0, dnorm_norm_mean = 0;
    for (int c = 0; c < C; ++c) {
      const T norm = (x[c] - m) * s;
      const T dnorm = w[c] * d[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= C;
    dnorm_norm_mean /= C;
    for (int c = 0; c < C; ++c) {
      const T norm = (x[c] - m) * s;
      const T dnorm = w[c] * d[c];
      db[c] += d[c];
      dw[c] += norm * d[c];
      dx[c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
    }
  }
}

template <typename T>
void matmul_forward(T* out, const T* inp, const T* w, const T* bias, int N, int IC, int OC) {
  T beta = 0;
  if (bias != nullptr) {
    for (int i = 0; i < N; ++i)
      std::memcpy(out + static_cast<int64_t>(i) * OC, bias, OC * sizeof(T));
    beta = 1;
  }
  gemm(false, true, N, OC, IC, T(1), inp, IC, w, IC, beta, out, OC);
}

template <typename T>
void matmul_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N,
                     int IC, int OC) {
  if (dinp != nullptr) gemm(false, false, N, IC, OC, T(1), dout, OC, w, IC, T(1), dinp, IC);
  gemm(true, false, OC, IC, N, T(1), dout, OC, inp, IC, T(1), dw, IC);
  if (dbias != nullptr) {
    for (int i = 0; i < N; ++i) {
      const T* d = dout + static_cast<int64_t>(i) * OC;
      for (int o = 0; o < OC; ++o) dbias[o] += d[o];
    }
  }
}

// Attention works on blocks of query rows: rows [i0, i1) attend to keys [0, i1) only, so the
// BLAS calls skip most of the masked upper triangle (at T=256, 62% of the square is computed)
// while staying large enough to run at matrix speed.
constexpr int kAttentionRowBlock = 64;

namespace {

// One (batch row, head) of attention_forward: its queries, keys and values (rows ld apart),
// its probabilities att [T,T] and its output columns (rows C apart).
template <typename T>
void attention_forward_head(T* o, T* a, const T* q, int Tn, int C, int hs) {
  const int ld = 3 * C;
  const T* k = q + C;
  const T* v = q + 2 * C;
  const T scale = T(1) / std::sqrt(T(hs));
  for (int i0 = 0; i0 < Tn; i0 += kAttentionRowBlock) {
    const int i1 = std::min(Tn, i0 + kAttentionRowBlock);
    const int rows = i1 - i0;
    T* ab = a + static_cast<int64_t>(i0) * Tn;
    gemm(false, true, rows, i1, hs, scale, q + static_cast<int64_t>(i0) * ld, ld, k, ld, T(0), ab,
         Tn);
    for (int i = i0; i < i1; ++i) {
      T* row = a + static_cast<int64_t>(i) * Tn;
      T mx = -std::numeric_limits<T>::infinity();
      for (int j = 0; j <= i; ++j) mx = std::max(mx, row[j]);
      T sum = 0;
      for (int j = 0; j <= i; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const T inv = T(1) / sum;
      for (int j = 0; j <= i; ++j) row[j] *= inv;
      for (int j = i + 1; j < Tn; ++j) row[j] = 0;
    }
    gemm(false, false, rows, hs, i1, T(1), ab, Tn, v, ld, T(0), o + static_cast<int64_t>(i0) * C,
         C);
  }
}

// One (batch row, head) of attention_backward, laid out as in attention_forward_head; d is
// that head's output gradient (rows C apart). scratch: T*T elements.
template <typename T>
void attention_backward_head(T* dq, T* scratch, const T* d, const T* q, const T* a, int Tn, int C,
                             int hs) {
  const int ld = 3 * C;
  const T* k = q + C;
  const T* v = q + 2 * C;
  T* dk = dq + C;
  T* dv = dq + 2 * C;
  const T scale = T(1) / std::sqrt(T(hs));
  for (int i0 = 0; i0 < Tn; i0 += kAttentionRowBlock) {
    const int i1 = std::min(Tn, i0 + kAttentionRowBlock);
    const int rows = i1 - i0;
    const T* ab = a + static_cast<int64_t>(i0) * Tn;
    const T* db = d + static_cast<int64_t>(i0) * C;
    T* sb = scratch + static_cast<int64_t>(i0) * Tn;
    // datt = dout V^T; dV += att^T dout (keys [0, i1) only: the rest of att is 0).
    gemm(false, true, rows, i1, hs, T(1), db, C, v, ld, T(0), sb, Tn);
    gemm(true, false, i1, hs, rows, T(1), ab, Tn, db, C, T(1), dv, ld);
    // Softmax backward in place: dpre = att * (datt - sum_j att * datt), causal part only.
    for (int i = i0; i < i1; ++i) {
      const T* arow = a + static_cast<int64_t>(i) * Tn;
      T* srow = scratch + static_cast<int64_t>(i) * Tn;
      T dot = 0;
      for (int j = 0; j <= i; ++j) dot += arow[j] * srow[j];
      for (int j = 0; j <= i; ++j) srow[j] = arow[j] * (srow[j] - dot);
      for (int j = i + 1; j < i1; ++j) srow[j] = 0;
    }
    // pre = scale Q K^T: dQ += scale dpre K; dK += scale dpre^T Q.
    gemm(false, false, rows, hs, i1, scale, sb, Tn, k, ld, T(1), dq + static_cast<int64_t>(i0) * ld,
         ld);
    gemm(true, false, i1, hs, rows, scale, sb, Tn, q + static_cast<int64_t>(i0) * ld, ld, T(1), dk,
         ld);
  }
}

}  // namespace

// The (batch row, head) pairs are independent: they run over the threads, each one whole.
template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H) {
  const int hs = C / H;
  parallel_for(B * H, [&](int bh) {
    const int b = bh / H, h = bh % H;
    attention_forward_head(out + static_cast<int64_t>(b) * Tn * C + h * hs,
                           att + static_cast<int64_t>(bh) * Tn * Tn,
                           qkv + static_cast<int64_t>(b) * Tn * 3 * C + h * hs, Tn, C, hs);
  });
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                        int H) {
  const int hs = C / H;
  parallel_for(B * H, [&](int bh) {
    thread_local std::vector<T> scratch;
    scratch.resize(static_cast<size_t>(Tn) * Tn);
    const int b = bh / H, h = bh % H;
    const int64_t base = static_cast<int64_t>(b) * Tn * 3 * C + h * hs;
    attention_backward_head(dqkv + base, scratch.data(),
                            dout + static_cast<int64_t>(b) * Tn * C + h * hs, qkv + base,
                            att + static_cast<int64_t>(bh) * Tn * Tn, Tn, C, hs);
  });
}

namespace {
template <typename T>
constexpr T kGeluScale = T(0.7978845608028654);  // sqrt(2/pi)
template <typename T>
constexpr T kGeluCubic = T(0.044715);

// e^x in float without a library call, so the GELU loops vectorize: x = n ln2 + r with
// |r| <= ln2/2, e^r by its Taylor series to r^7 (relative error < 2e-8 plus rounding), 2^n
// built in the exponent bits. Inputs are clamped to [-87, 88], where e^x stays normal.
// Forced inline (as gelu_tanh): a call left in the loop body stops the vectorizer.
[[gnu::always_inline]] inline float exp_float(float x) {
  // Written so that NaN maps to -87 (the float-to-int conversion below must stay defined);
  // the callers' own arithmetic still propagates the NaN.
  x = x > -87.0f ? x : -87.0f;
  x = x < 88.0f ? x : 88.0f;
  // Round to nearest by the 1.5 * 2^23 trick (no rounding instruction in baseline x86-64).
  const float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 split in two parts
  const float p =
      1.0f +
      r * (1.0f + r * (0.5f + r * (1.0f / 6 +
                                   r * (1.0f / 24 +
                                        r * (1.0f / 120 + r * (1.0f / 720 + r * (1.0f / 5040)))))));
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

// tanh on the float path: glibc's tanhf made GELU a fifth of a training step. Near 0, where
// 1 - 2/(1 + e^2x) cancels, an odd Taylor series (error < 1e-9 below 0.3) takes over; both
// are computed so the choice is a select, not a branch. Max error against std::tanh: a few
// ulp. Double (the gradient checks) keeps std::tanh.
template <typename T>
[[gnu::always_inline]] inline T gelu_tanh(T x) {
  if constexpr (std::is_same_v<T, float>) {
    const float x2 = x * x;
    const float series =
        x *
        (1.0f + x2 * (-1.0f / 3 +
                      x2 * (2.0f / 15 +
                            x2 * (-17.0f / 315 + x2 * (62.0f / 2835 + x2 * (-1382.0f / 155925))))));
    const float via_exp = 1.0f - 2.0f / (1.0f + exp_float(2.0f * x));
    return std::abs(x) >= 0.3f ? via_exp : series;  // NaN takes the series: stays NaN
  } else {
    return std::tanh(x);
  }
}
}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    out[i] = T(0.5) * x * (T(1) + gelu_tanh(kGeluScale<T> * (x + kGeluCubic<T> * x * x * x)));
  }
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T x = inp[i];
    const T th = gelu_tanh(kGeluScale<T> * (x + kGeluCubic<T> * x * x * x));
    const T sech2 = T(1) - th * th;
    // Where tanh saturates (sech2 = 0) the second term is 0, not 0 * inf once x^2 overflows.
    const T curve = sech2 > T(0)
                        ? T(0.5) * x * sech2 * kGeluScale<T> * (T(1) + T(3) * kGeluCubic<T> * x * x)
                        : T(0);
    const T grad = T(0.5) * (T(1) + th) + curve;
    dinp[i] += grad * dout[i];
  }
}

template <typename T>
void residual_forward(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename T>
void residual_backward(T* da, T* db, const T* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

template <typename T>
int softmax_crossentropy_forward(T* losses, T* probs, const T* logits, const int32_t* targets,
                                 int N, int V, int Vp) {
  int counted = 0;
  for (int i = 0; i < N; ++i) {
    const T* z = logits + static_cast<int64_t>(i) * Vp;
    T* p = probs + static_cast<int64_t>(i) * Vp;
    T mx = -std::numeric_limits<T>::infinity();
    for (int v = 0; v < V; ++v) mx = std::max(mx, z[v]);
    const int tgt = targets[i];
    // The target's logit is read before p (which may alias z) is overwritten.
    const T zt = tgt >= 0 ? z[tgt] : T(0);
    T sum = 0;
    for (int v = 0; v < V; ++v) {
      p[v] = std::exp(z[v] - mx);
      sum += p[v];
    }
    const T inv = T(1) / sum;
    for (int v = 0; v < V; ++v) p[v] *= inv;
    for (int v = V; v < Vp; ++v) p[v] = 0;
    if (tgt >= 0) {
      // log-sum-exp form: stays finite where the target's probability underflows.
      losses[i] = std::log(sum) + mx - zt;
      ++counted;
    } else {
      losses[i] = 0;
    }
  }
  return counted;
}

template <typename T>
void softmax_crossentropy_backward(T* dlogits, const T* probs, const T* dlosses,
                                   const int32_t* targets, int N, int V, int Vp) {
  for (int i = 0; i < N; ++i) {
    const T* p = probs + static_cast<int64_t>(i) * Vp;
    T* dz = dlogits + static_cast<int64_t>(i) * Vp;
    const int tgt = targets[i];
    if (tgt < 0) {
      for (int v = 0; v < Vp; ++v) dz[v] = 0;
      continue;
    }
    const T dl = dlosses[i];
    for (int v = 0; v < V; ++v) dz[v] = dl * (p[v] - (v == tgt ? T(1) : T(0)));
    for (int v = V; v < Vp; ++v) dz[v] = 0;
  }
}

#define RAILYARD_INSTANTIATE(T)                                                                    \
  template void encoder_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int);         \
  template void encoder_backward<T>(T*, T*, const T*, const int32_t*, int, int, int);              \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, int, int);          \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*,          \
                                      const T*, int, int);                                         \
  template void matmul_forward<T>(T*, const T*, const T*, const T*, int, int, int);                \
  template void matmul_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int);       \
  template void attention_forward<T>(T*, T*, const T*, int, int, int, int);                        \
  template void attention_backward<T>(T*, const T*, const T*, const T*, int, int, int, int);       \
  template void gelu_forward<T>(T*, const T*, int64_t);                                            \
  template void gelu_backward<T>(T*, const T*, const T*, int64_t);                                 \
  template void residual_forward<T>(T*, const T*, const T*, int64_t);                              \
  template void residual_backward<T>(T*, T*, const T*, int64_t);                                   \
  template int softmax_crossentropy_forward<T>(T*, T*, const T*, const int32_t*, int, int, int);   \
  template void softmax_crossentropy_backward<T>(T*, const T*, const T*, const int32_t*, int, int, \
                                                 int);

RAILYARD_INSTANTIATE(float)
RAILYARD_INSTANTIATE(double)
#undef RAILYARD_INSTANTIATE

}  // namespace railyard::cpu
