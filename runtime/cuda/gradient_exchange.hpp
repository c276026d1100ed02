#pragma once
// Bucketed gradient all-reduce on its own stream. Backward hands each bucket over as soon as
// its gradients are final, so the exchange of late layers overlaps the backward pass of early
// ones; the optimizer waits for all of it.

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "dtype.hpp"
#include "grad_bucket.hpp"
#include "nccl_comm.hpp"

namespace railyard::cuda {

class GradientExchange {
 public:
  // `bf16_scratch` (as large as `grads`) is needed when reduce_bf16; the mean is then taken in
  // bf16 and converted back to fp32.
  GradientExchange(NcclComm& nccl, float* grads, bf16* bf16_scratch,
                   std::vector<GradBucket> buckets, bool reduce_bf16);
  ~GradientExchange();
  GradientExchange(const GradientExchange&) = delete;
  GradientExchange& operator=(const GradientExchange&) = delete;

  size_t buckets() const { return buckets_.size(); }
  // The exchange's stream: work queued on it after launch(i) sees bucket i averaged.
  cudaStream_t stream() const { return stream_; }
  // Bucket `i` is final once the work queued on `compute` so far has run.
  void launch(size_t i, cudaStream_t compute);
  // Launches the buckets not launched yet, then makes `compute` wait for all of them.
  void finish(cudaStream_t compute);

 private:
  NcclComm& nccl_;
  float* grads_;
  bf16* scratch_;
  std::vector<GradBucket> buckets_;
  bool reduce_bf16_;
  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> ready_;
  cudaEvent_t done_ = nullptr;
  std::vector<bool> launched_;
};

}  // namespace railyard::cuda
