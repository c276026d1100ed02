#include <cmath>

#include "attention.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

// Between [B, T, parts, H, hd] (token-major) and [parts][B, H, T, hd] (head-major). One block
// per token: its parts * C elements are contiguous on the token-major side; each thread moves
// 16-byte packs.
template <typename T>
__global__ void head_permute_kernel(T* dst, const T* src, int Tn, int H, int hd, int parts,
                                    size_t per_part, bool to_heads) {
  constexpr int kN = Pack<T>::kN;
  const int n = blockIdx.x, b = n / Tn, t = n % Tn;
  const int packs_per_head = hd / kN, packs_per_part = H * packs_per_head;
  const T* tok_src = src + size_t(n) * parts * H * hd;
  T* tok_dst = dst + size_t(n) * parts * H * hd;
  for (int i = threadIdx.x; i < parts * packs_per_part; i += blockDim.x) {
    int part = i / packs_per_part, r = i % packs_per_part;
    int h = r / packs_per_head, v = r % packs_per_head;
    size_t head = part * per_part + ((size_t(b) * H + h) * Tn + t) * hd + size_t(v) * kN;
    if (to_heads) {
      store_pack(dst + head, load_pack(tok_src + size_t(i) * kN));
    } else {
      store_pack(tok_dst + size_t(i) * kN, load_pack(src + head));
    }
  }
}

// One warp per row of scores; row t of each head sees keys 0..t. Masked entries are written 0
// so the following products may read whole rows; packs wholly above the diagonal are not read.
template <typename T>
__global__ void causal_softmax_forward_kernel(T* p, size_t rows, int Tn) {
  constexpr int kN = Pack<T>::kN;
  size_t row = blockIdx.x * size_t(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  int t = static_cast<int>(row % Tn);
  T* r = p + row * Tn;
  float m = -INFINITY, s = 0.0f;
  for (int j0 = lane * kN; j0 <= t; j0 += 32 * kN) {
    Pack<T> x = load_pack(r + j0);
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      if (j0 + k > t) break;
      float v = to_f(x.v[k]);
      if (v > m) {
        s = s * __expf(m - v) + 1.0f;
        m = v;
      } else {
        s += __expf(v - m);
      }
    }
  }
  float M = warp_max(m);
  s = m == -INFINITY ? 0.0f : s * __expf(m - M);
  float inv = 1.0f / warp_sum(s);
  for (int j0 = lane * kN; j0 < Tn; j0 += 32 * kN) {
    Pack<T> x;
    if (j0 <= t) x = load_pack(r + j0);
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      x.v[k] = from_f<T>(j0 + k <= t ? __expf(to_f(x.v[k]) - M) * inv : 0.0f);
    }
    store_pack(r + j0, x);
  }
}

// dS = P * (dP - sum_j P dP), in place over dP.
template <typename T>
__global__ void causal_softmax_backward_kernel(T* dp, const T* p, size_t rows, int Tn) {
  constexpr int kN = Pack<T>::kN;
  size_t row = blockIdx.x * size_t(blockDim.x / 32) + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  int t = static_cast<int>(row % Tn);
  T* d = dp + row * Tn;
  const T* pr = p + row * Tn;
  float s = 0.0f;
  for (int j0 = lane * kN; j0 <= t; j0 += 32 * kN) {
    Pack<T> a = load_pack(pr + j0), g = load_pack(d + j0);
#pragma unroll
    for (int k = 0; k < kN; ++k) s += to_f(a.v[k]) * to_f(g.v[k]);  // P is 0 past the diagonal
  }
  s = warp_sum(s);
  for (int j0 = lane * kN; j0 < Tn; j0 += 32 * kN) {
    Pack<T> out;
    if (j0 <= t) {
      Pack<T> a = load_pack(pr + j0), g = load_pack(d + j0);
#pragma unroll
      for (int k = 0; k < kN; ++k) {
        out.v[k] = from_f<T>(j0 + k <= t ? to_f(a.v[k]) * (to_f(g.v[k]) - s) : 0.0f);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kN; ++k) out.v[k] = from_f<T>(0.0f);
    }
    store_pack(d + j0, out);
  }
}

template <typename T>
void head_permute(T* dst, const T* src, const AttentionShape& s, int parts, bool to_heads,
                  cudaStream_t stream) {
  head_permute_kernel<<<s.B * s.T, 128, 0, stream>>>(dst, src, s.T, s.H, s.hd, parts,
                                                     s.head_elems(), to_heads);
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
