#pragma once
// Timing a GPU call by CUDA events, for the benches that time single products
// (gemm_epilogue_bench, cutlass_gelu_bench): each call between its own pair of events, so the
// median is not moved by a slow outlier.

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "cuda_check.hpp"

namespace railyard::bench {

// `n` events, destroyed with the object (also when a timed call throws).
class Events {
 public:
  explicit Events(size_t n) {
    ev_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      cudaEvent_t e = nullptr;
      RY_CUDA(cudaEventCreate(&e));
      ev_.push_back(e);
    }
  }
  ~Events() {
    for (cudaEvent_t e : ev_) cudaEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  cudaEvent_t operator[](size_t i) const { return ev_[i]; }

 private:
  std::vector<cudaEvent_t> ev_;
};

struct CallTimes {
  double median_us = 0, min_us = 0;
};

// `warmup` calls of `run` on `s`, then `reps` (>= 1) timed ones.
inline CallTimes time_calls(const std::function<void(cudaStream_t)>& run, cudaStream_t s,
                            int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) run(s);
  Events ev(2 * size_t(reps));
  for (int i = 0; i < reps; ++i) {
    RY_CUDA(cudaEventRecord(ev[2 * i], s));
    run(s);
    RY_CUDA(cudaEventRecord(ev[2 * i + 1], s));
  }
  RY_CUDA(cudaStreamSynchronize(s));
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    RY_CUDA(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us.push_back(ms * 1e3);
  }
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  return {n % 2 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2, us.front()};
}

}  // namespace railyard::bench
