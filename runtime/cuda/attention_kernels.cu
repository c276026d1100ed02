#include <cmath>

#include "attention.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

// Between [B, T, parts, H, hd] (token-major) and [parts][B, H, T, hd] (head-major).
template <typename T>
__global__ void head_permute_kernel(T* dst, const T* src, int B, int Tn, int H, int hd, int parts,
                                    bool to_heads) {
  size_t per_part = size_t(B) * H * Tn * hd;
  size_t total = per_part * parts;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t part = i / per_part, r = i % per_part;
    int d = static_cast<int>(r % hd);
    r /= hd;
    int t = static_cast<int>(r % Tn);
    r /= Tn;
    int h = static_cast<int>(r % H);
    size_t b = r / H;
    size_t tok = ((b * Tn + t) * parts + part) * size_t(H) * hd + size_t(h) * hd + d;
    if (to_heads) {
      dst[i] = src[tok];
    } else {
      dst[tok] = src[i];
    }
  }
}

// One warp per row of scores; row t of each head sees keys 0..t. Masked entries are written 0
// so the following products may read whole rows.
template <typename T>
__global__ void causal_softmax_forward_kernel(T* p, size_t rows, int Tn) {
  size_t row = blockIdx.x * size_t(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  int t = static_cast<int>(row % Tn);
  T* r = p + row * Tn;
  float m = -INFINITY;
  for (int j = lane; j <= t; j += 32) m = fmaxf(m, to_f(r[j]));
  m = warp_max(m);
  float s = 0.0f;
  for (int j = lane; j <= t; j += 32) s += __expf(to_f(r[j]) - m);
  float inv = 1.0f / warp_sum(s);
  for (int j = lane; j < Tn; j += 32) {
    r[j] = from_f<T>(j <= t ? __expf(to_f(r[j]) - m) * inv : 0.0f);
  }
}

// dS = P * (dP - sum_j P dP), in place over dP.
template <typename T>
__global__ void causal_softmax_backward_kernel(T* dp, const T* p, size_t rows, int Tn) {
  size_t row = blockIdx.x * size_t(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  int t = static_cast<int>(row % Tn);
  T* d = dp + row * Tn;
  const T* pr = p + row * Tn;
  float s = 0.0f;
  for (int j = lane; j <= t; j += 32) s += to_f(pr[j]) * to_f(d[j]);
  s = warp_sum(s);
  for (int j = lane; j < Tn; j += 32) {
    d[j] = from_f<T>(j <= t ? to_f(pr[j]) * (to_f(d[j]) - s) : 0.0f);
  }
}

int blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return static_cast<int>(b < 65536 ? b : 65536);
}

template <typename T>
void head_permute(T* dst, const T* src, const AttentionShape& s, int parts, bool to_heads,
                  cudaStream_t stream) {
  head_permute_kernel<<<blocks_for(s.head_elems() * parts), 256, 0, stream>>>(
      dst, src, s.B, s.T, s.H, s.hd, parts, to_heads);
  RY_CUDA_LAUNCHED();
}

// Per head (batch index b*H + h), all row-major: [T, hd] operands, [T, T] scores.
// X Y^T -> [T, T]:  column-major (Y X^T), i.e. A = Y transposed.
template <typename T>
void batched_xyt(Matmul& mm, T* out, const T* x, const T* y, float alpha, const AttentionShape& s,
                 cudaStream_t stream) {
  GemmCall c;
  c.trans_a = true;
  c.m = s.T, c.n = s.T, c.k = s.hd;
  c.a = y, c.lda = s.hd;
  c.b = x, c.ldb = s.hd;
  c.d = out, c.ldd = s.T;
  c.ab_type = c.d_type = cuda_dtype<T>();
  c.alpha = alpha;
  c.batch = s.B * s.H;
  c.stride_a = c.stride_b = int64_t(s.T) * s.hd;
  c.stride_d = int64_t(s.T) * s.T;
  mm.gemm(c, stream);
}

// P Y -> [T, hd] with P [T, T], Y [T, hd].
template <typename T>
void batched_py(Matmul& mm, T* out, const T* p, const T* y, float alpha, const AttentionShape& s,
                cudaStream_t stream) {
  GemmCall c;
  c.m = s.hd, c.n = s.T, c.k = s.T;
  c.a = y, c.lda = s.hd;
  c.b = p, c.ldb = s.T;
  c.d = out, c.ldd = s.hd;
  c.ab_type = c.d_type = cuda_dtype<T>();
  c.alpha = alpha;
  c.batch = s.B * s.H;
  c.stride_a = c.stride_d = int64_t(s.T) * s.hd;
  c.stride_b = int64_t(s.T) * s.T;
  mm.gemm(c, stream);
}

// P^T Y -> [T, hd] with P [T, T], Y [T, hd].
template <typename T>
void batched_pty(Matmul& mm, T* out, const T* p, const T* y, float alpha, const AttentionShape& s,
                 cudaStream_t stream) {
  GemmCall c;
  c.trans_b = true;
  c.m = s.hd, c.n = s.T, c.k = s.T;
  c.a = y, c.lda = s.hd;
  c.b = p, c.ldb = s.T;
  c.d = out, c.ldd = s.hd;
  c.ab_type = c.d_type = cuda_dtype<T>();
  c.alpha = alpha;
  c.batch = s.B * s.H;
  c.stride_a = c.stride_d = int64_t(s.T) * s.hd;
  c.stride_b = int64_t(s.T) * s.T;
  mm.gemm(c, stream);
}

}  // namespace

template <typename T>
void attention_forward(Matmul& mm, T* out, T* qkvp, T* probs, T* o_scratch, const T* qkv,
                       const AttentionShape& s, cudaStream_t stream) {
  size_t he = s.head_elems();
  const T* q = qkvp;
  const T* k = qkvp + he;
  const T* v = qkvp + 2 * he;
  head_permute(qkvp, qkv, s, 3, true, stream);
  batched_xyt(mm, probs, q, k, 1.0f / std::sqrt(float(s.hd)), s, stream);
  size_t rows = size_t(s.B) * s.H * s.T;
  causal_softmax_forward_kernel<<<static_cast<int>((rows + 7) / 8), 256, 0, stream>>>(probs, rows,
                                                                                      s.T);
  RY_CUDA_LAUNCHED();
  batched_py(mm, o_scratch, probs, v, 1.0f, s, stream);
  head_permute(out, o_scratch, s, 1, false, stream);
}

template <typename T>
void attention_backward(Matmul& mm, T* dqkv, T* dqkvp, T* dprobs, T* do_scratch, const T* dout,
                        const T* qkvp, const T* probs, const AttentionShape& s,
                        cudaStream_t stream) {
  size_t he = s.head_elems();
  const T* q = qkvp;
  const T* k = qkvp + he;
  const T* v = qkvp + 2 * he;
  float scale = 1.0f / std::sqrt(float(s.hd));
  head_permute(do_scratch, dout, s, 1, true, stream);
  batched_xyt(mm, dprobs, do_scratch, v, 1.0f, s, stream);              // dP = dO V^T
  batched_pty(mm, dqkvp + 2 * he, probs, do_scratch, 1.0f, s, stream);  // dV = P^T dO
  size_t rows = size_t(s.B) * s.H * s.T;
  causal_softmax_backward_kernel<<<static_cast<int>((rows + 7) / 8), 256, 0, stream>>>(
      dprobs, probs, rows, s.T);
  RY_CUDA_LAUNCHED();
  batched_py(mm, dqkvp, dprobs, k, scale, s, stream);        // dQ = dS K / sqrt(hd)
  batched_pty(mm, dqkvp + he, dprobs, q, scale, s, stream);  // dK = dS^T Q / sqrt(hd)
  head_permute(dqkv, dqkvp, s, 3, false, stream);
}

#define RY_INSTANTIATE(T)                                                                      \
  template void attention_forward<T>(Matmul&, T*, T*, T*, T*, const T*, const AttentionShape&, \
                                     cudaStream_t);                                            \
  template void attention_backward<T>(Matmul&, T*, T*, T*, T*, const T*, const T*, const T*,   \
                                      const AttentionShape&, cudaStream_t);
RY_INSTANTIATE(float)
RY_INSTANTIATE(bf16)
#undef RY_INSTANTIATE

}  // namespace railyard::cuda
