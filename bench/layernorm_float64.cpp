#include "layernorm_float64.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "cuda_check.hpp"

namespace railyard::bench {

std::vector<float> download_floats(const void* device, size_t n, bool bf16) {
  RY_CUDA(cudaDeviceSynchronize());
  std::vector<float> out(n);
  if (!bf16) {
    RY_CUDA(cudaMemcpy(out.data(), device, n * 4, cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<uint16_t> raw(n);
  RY_CUDA(cudaMemcpy(raw.data(), device, n * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = uint32_t(raw[i]) << 16;
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

double round_to_bf16(double v) {
  float f = float(v);
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

ForwardFloat64 layernorm_forward_float64(const std::vector<float>& x, const std::vector<float>& w,
                                         const std::vector<float>& b, int N, int C) {
  ForwardFloat64 r;
  r.out.resize(size_t(N) * C);
  r.mean.resize(N);
  r.rstd.resize(N);
  for (int i = 0; i < N; ++i) {
    const size_t o = size_t(i) * C;
    double s = 0;
    for (int c = 0; c < C; ++c) s += x[o + c];
    const double m = s / C;
    double v = 0;
    for (int c = 0; c < C; ++c) v += (x[o + c] - m) * (x[o + c] - m);
    const double rs = 1.0 / std::sqrt(v / C + 1e-5);
    for (int c = 0; c < C; ++c) r.out[o + c] = (x[o + c] - m) * rs * w[c] + b[c];
    r.mean[i] = m;
    r.rstd[i] = rs;
  }
  return r;
}

BackwardFloat64 layernorm_backward_float64(const std::vector<float>& dy,
                                           const std::vector<float>& x,
                                           const std::vector<float>& w,
                                           const std::vector<float>& mean,
                                           const std::vector<float>& rstd,
                                           const std::vector<float>* dx0, int N, int C) {
  BackwardFloat64 r;
  r.dx.resize(size_t(N) * C);
  r.dw.assign(C, 0.0);
  r.db.assign(C, 0.0);
  r.dsum.assign(C, 0.0);
  for (int i = 0; i < N; ++i) {
    const size_t o = size_t(i) * C;
    const double m = mean[i], rs = rstd[i];
    double s1 = 0, s2 = 0;
    for (int c = 0; c < C; ++c) {
      const double g = double(dy[o + c]) * w[c], xh = (x[o + c] - m) * rs;
      s1 += g;
      s2 += g * xh;
    }
    s1 /= C;
    s2 /= C;
    for (int c = 0; c < C; ++c) {
      const double d = dy[o + c], xh = (x[o + c] - m) * rs;
      const double v = rs * (d * w[c] - s1 - xh * s2) + (dx0 != nullptr ? (*dx0)[o + c] : 0.0);
      r.dx[o + c] = v;
      r.dw[c] += d * xh;
      r.db[c] += d;
      r.dsum[c] += round_to_bf16(v);
    }
  }
  return r;
}

double relative_error(const std::vector<float>& a, const std::vector<double>& ref, int rows,
                      int cols, int lda) {
  double diff = 0, scale = 0;
  for (int i = 0; i < rows; ++i) {
    for (int c = 0; c < cols; ++c) {
      const double v = a[size_t(i) * lda + c], e = ref[size_t(i) * cols + c];
      if (!std::isfinite(v)) return std::numeric_limits<double>::infinity();
      diff = std::max(diff, std::fabs(v - e));
      scale = std::max(scale, std::fabs(e));
    }
  }
  return diff == 0 ? 0.0 : diff / scale;
}

}  // namespace railyard::bench
