#include <cmath>

#include "cross_entropy_kernels.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

constexpr int kThreads = 512;

// (max, sum of exp(x - max)) pairs combine associatively; an empty pair is (-inf, 0).
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  float M = fmaxf(m, m2);
  if (M == -INFINITY) return;
  s = s * expf(m - M) + s2 * expf(m2 - M);
  m = M;
}

// One block per row, 16-byte packs (Vp is a multiple of 8); the padding columns [V, Vp) are
// skipped in the sums and get gradient 0.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(T* logits, float* losses, const int32_t* targets, int V, int Vp,
                         float dscale, bool write_grad) {
  constexpr int kN = Pack<T>::kN;
  __shared__ float sm[32], ss[32];
  __shared__ float row_max, row_sum;
  T* x = logits + size_t(blockIdx.x) * Vp;
  const int tgt = targets[blockIdx.x];
  float m = -INFINITY, s = 0.0f;
  for (int j0 = threadIdx.x * kN; j0 < V; j0 += blockDim.x * kN) {
    Pack<T> p = load_pack(x + j0);
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      if (j0 + k >= V) break;
      float v = to_f(p.v[k]);
      if (v > m) {
        s = s * __expf(m - v) + 1.0f;
        m = v;
      } else {
        s += __expf(v - m);
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, o);
    float s2 = __shfl_xor_sync(0xffffffffu, s, o);
    combine(m, s, m2, s2);
  }
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float M = sm[0], S = ss[0];
    for (int w = 1; w < int(blockDim.x / 32); ++w) combine(M, S, sm[w], ss[w]);
    row_max = M;
    row_sum = S;
    losses[blockIdx.x] = tgt < 0 ? 0.0f : logf(S) + M - to_f(x[tgt]);
  }
  __syncthreads();
  if (!write_grad) return;
  const float M = row_max, inv = 1.0f / row_sum;
  for (int j0 = threadIdx.x * kN; j0 < Vp; j0 += blockDim.x * kN) {
    Pack<T> p = load_pack(x + j0);
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      int j = j0 + k;
      float g = 0.0f;
      if (j < V && tgt >= 0)
        g = (__expf(to_f(p.v[k]) - M) * inv - (j == tgt ? 1.0f : 0.0f)) * dscale;
      p.v[k] = from_f<T>(g);
    }
    store_pack(x + j0, p);
  }
}

}  // namespace

template <typename T>
void cross_entropy_forward_backward(T* logits, float* losses, const int32_t* targets, int N, int V,
                                    int Vp, float dscale, bool write_grad, cudaStream_t stream) {
  cross_entropy_kernel<T>
      <<<N, kThreads, 0, stream>>>(logits, losses, targets, V, Vp, dscale, write_grad);
  RY_CUDA_LAUNCHED();
}

template void cross_entropy_forward_backward<float>(float*, float*, const int32_t*, int, int, int,
                                                    float, bool, cudaStream_t);
template void cross_entropy_forward_backward<bf16>(bf16*, float*, const int32_t*, int, int, int,
                                                   float, bool, cudaStream_t);

}  // namespace railyard::cuda
