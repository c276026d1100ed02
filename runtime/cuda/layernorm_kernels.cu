#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "layernorm_kernels.hpp"

namespace railyard::cuda {

namespace {

constexpr int kWarps = 8;  // rows per block, one warp each

// With delta non-null, the row is x + delta (rounded to T, the value stored and normalised).
template <typename T>
__global__ void layernorm_forward_kernel(T* resid_out, T* out, float* mean, float* rstd, const T* x,
                                         const T* delta, const T* w, const T* b, int N, int C) {
  int row = blockIdx.x * kWarps + threadIdx.x / 32;
  int lane = threadIdx.x % 32;
  if (row >= N) return;
  const T* xr = x + size_t(row) * C;
  const T* src = xr;
  if (delta != nullptr) {
    const T* dr = delta + size_t(row) * C;
    T* rr = resid_out + size_t(row) * C;
    for (int c = lane; c < C; c += 32) rr[c] = from_f<T>(to_f(xr[c]) + to_f(dr[c]));
    src = rr;
  }
  float s = 0.0f;
  for (int c = lane; c < C; c += 32) s += to_f(src[c]);
  float m = warp_sum(s) / C;
  float v = 0.0f;
  for (int c = lane; c < C; c += 32) {
    float d = to_f(src[c]) - m;
    v += d * d;
  }
  float r = rsqrtf(warp_sum(v) / C + kLayerNormEps);
  T* o = out + size_t(row) * C;
  for (int c = lane; c < C; c += 32) {
    o[c] = from_f<T>((to_f(src[c]) - m) * r * to_f(w[c]) + to_f(b[c]));
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = r;
  }
}

// Blocks stride over rows; each block sums its dw, db in shared memory, then adds once.
template <typename T>
__global__ void layernorm_backward_kernel(T* dx, float* dw, float* db, const T* dy, const T* x,
                                          const T* w, const float* mean, const float* rstd, int N,
                                          int C, bool accumulate) {
  extern __shared__ float acc[];  // dw[C], db[C]
  for (int c = threadIdx.x; c < 2 * C; c += blockDim.x) acc[c] = 0.0f;
  __syncthreads();
  int lane = threadIdx.x % 32;
  for (int row = blockIdx.x * kWarps + threadIdx.x / 32; row < N; row += gridDim.x * kWarps) {
    const T* dyr = dy + size_t(row) * C;
    const T* xr = x + size_t(row) * C;
    float m = mean[row], r = rstd[row];
    float s1 = 0.0f, s2 = 0.0f;
    for (int c = lane; c < C; c += 32) {
      float g = to_f(dyr[c]) * to_f(w[c]);
      float xh = (to_f(xr[c]) - m) * r;
      s1 += g;
      s2 += g * xh;
    }
    s1 = warp_sum(s1) / C;
    s2 = warp_sum(s2) / C;
    T* dxr = dx + size_t(row) * C;
    for (int c = lane; c < C; c += 32) {
      float d = to_f(dyr[c]);
      float xh = (to_f(xr[c]) - m) * r;
      float g = r * (d * to_f(w[c]) - s1 - xh * s2);
      dxr[c] = from_f<T>(accumulate ? to_f(dxr[c]) + g : g);
      atomicAdd(&acc[c], d * xh);
      atomicAdd(&acc[C + c], d);
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    atomicAdd(&dw[c], acc[c]);
    atomicAdd(&db[c], acc[C + c]);
  }
}

}  // namespace

template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, int N,
                       int C, cudaStream_t stream) {
  layernorm_forward_kernel<T><<<(N + kWarps - 1) / kWarps, kWarps * 32, 0, stream>>>(
      nullptr, out, mean, rstd, x, nullptr, w, b, N, C);
  RY_CUDA_LAUNCHED();
}

template <typename T>
void residual_layernorm_forward(T* resid_out, T* out, float* mean, float* rstd, const T* x,
                                const T* delta, const T* w, const T* b, int N, int C,
                                cudaStream_t stream) {
  layernorm_forward_kernel<T><<<(N + kWarps - 1) / kWarps, kWarps * 32, 0, stream>>>(
      resid_out, out, mean, rstd, x, delta, w, b, N, C);
  RY_CUDA_LAUNCHED();
}

template <typename T>
void layernorm_backward(T* dx, float* dw, float* db, const T* dy, const T* x, const T* w,
                        const float* mean, const float* rstd, int N, int C, bool accumulate,
                        cudaStream_t stream) {
  int blocks = (N + kWarps - 1) / kWarps;
  if (blocks > 264) blocks = 264;  // two per multiprocessor on an H200: few shared-sum flushes
  size_t smem = 2 * size_t(C) * sizeof(float);
  layernorm_backward_kernel<T>
      <<<blocks, kWarps * 32, smem, stream>>>(dx, dw, db, dy, x, w, mean, rstd, N, C, accumulate);
  RY_CUDA_LAUNCHED();
}

#define RY_INSTANTIATE(T)                                                                        \
  template void layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, int, \
                                     cudaStream_t);                                              \
  template void residual_layernorm_forward<T>(T*, T*, float*, float*, const T*, const T*,        \
                                              const T*, const T*, int, int, cudaStream_t);       \
  template void layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*,          \
                                      const float*, const float*, int, int, bool, cudaStream_t);
RY_INSTANTIATE(float)
RY_INSTANTIATE(bf16)
#undef RY_INSTANTIATE

}  // namespace railyard::cuda
