#pragma once
// A small harness for the GPU checks: skip (exit 77) without a GPU, random inputs rounded to
// the device type, poisoned outputs, and relative error against a float64 reference.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_check.hpp"
#include "device_buffer.hpp"

namespace railyard::gpu_check {

inline void skip_without_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    std::exit(77);
  }
}

// x as a T holds it: bf16 rounds; float and double hold every float exactly (a double array's
// mirror once took bf16's rounding here, which check_norm_clip_fused read as a kernel error).
template <typename T>
float round_to(float x) {
  static_assert(
      std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, __nv_bfloat16>,
      "round_to: a float, double or bf16 array");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(__float2bfloat16(x));
  } else {
    return x;
  }
}

template <typename T>
const char* type_name() {
  return std::is_same_v<T, float> ? "fp32" : "bf16";
}

// A device array of T with a host mirror in double (the values the device holds, exactly).
template <typename T>
struct DevArray {
  cuda::DeviceBuffer buf;
  size_t n = 0;
  explicit DevArray(size_t count) : buf(count * sizeof(T)), n(count) {}
  T* ptr() const { return buf.as<T>(); }
  // Uploads `v` rounded to T and returns the rounded values.
  std::vector<double> upload(const std::vector<float>& v) {
    std::vector<T> h(n);
    std::vector<double> back(n);
    for (size_t i = 0; i < n; ++i) {
      h[i] = T(v[i]);
      back[i] = round_to<T>(v[i]);
    }
    RY_CUDA(cudaMemcpy(ptr(), h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    return back;
  }
  // All bits set: NaN in fp32 and bf16, so an element a kernel forgets shows up.
  void poison() { RY_CUDA(cudaMemset(ptr(), 0xFF, n * sizeof(T))); }
  std::vector<double> download() const {
    std::vector<T> h(n);
    RY_CUDA(cudaDeviceSynchronize());
    RY_CUDA(cudaMemcpy(h.data(), ptr(), n * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<double> out(n);
    for (size_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, double>) {
        out[i] = h[i];
      } else {
        out[i] = double(float(h[i]));
      }
    }
    return out;
  }
};

// `call` captured on a stream of its own into a CUDA graph, replayed once and waited for, as the
// engine's step replays its products.
inline void run_in_graph(const std::function<void(cudaStream_t)>& call) {
  cudaStream_t s = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  RY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  RY_CUDA(cudaDeviceSynchronize());  // earlier work (legacy stream) before s, which does not wait
  RY_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  call(s);
  RY_CUDA(cudaStreamEndCapture(s, &graph));
  RY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  RY_CUDA(cudaGraphLaunch(exec, s));
  RY_CUDA(cudaStreamSynchronize(s));
  RY_CUDA(cudaGraphExecDestroy(exec));
  RY_CUDA(cudaGraphDestroy(graph));
  RY_CUDA(cudaStreamDestroy(s));
}

inline std::vector<float> random_vec(std::mt19937_64& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Counts failures; prints one line per comparison.
class Report {
 public:
  void check(const std::string& what, const std::vector<double>& out,
             const std::vector<double>& ref, double tol) {
    double num = 0, den = 0;
    bool nan = out.size() != ref.size();
    for (size_t i = 0; i < out.size() && i < ref.size(); ++i) {
      if (!std::isfinite(out[i])) nan = true;
      num += (out[i] - ref[i]) * (out[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    bool ok = !nan && rel <= tol;
    if (!ok) ++failures_;
    std::printf("%-4s %-44s rel_err %.3e (tol %.0e)%s\n", ok ? "ok" : "FAIL", what.c_str(), rel,
                tol, nan ? " NON-FINITE OR MISSING" : "");
  }
  // Bit for bit: the values of two runs of the same computation (NaN never equals).
  void same_bits(const std::string& what, const std::vector<double>& out,
                 const std::vector<double>& ref) {
    size_t diff = out.size() == ref.size() ? 0 : 1;
    for (size_t i = 0; i < out.size() && i < ref.size(); ++i) {
      if (std::memcmp(&out[i], &ref[i], sizeof(double)) != 0 || !std::isfinite(out[i])) ++diff;
    }
    if (diff != 0) ++failures_;
    std::printf("%-4s %-44s %zu element(s) differ\n", diff == 0 ? "ok" : "FAIL", what.c_str(),
                diff);
  }
  void fail(const std::string& what) {
    ++failures_;
    std::printf("FAIL %s\n", what.c_str());
  }
  int exit_code() const {
    std::printf("%s: %d failure(s)\n", failures_ == 0 ? "PASSED" : "FAILED", failures_);
    return failures_ == 0 ? 0 : 1;
  }

 private:
  int failures_ = 0;
};

}  // namespace railyard::gpu_check
