#include "gradient_exchange.hpp"

#include "convert_kernels.hpp"
#include "cuda_check.hpp"

namespace railyard::cuda {

GradientExchange::GradientExchange(NcclComm& nccl, float* grads, bf16* bf16_scratch,
                                   std::vector<GradBucket> buckets, bool reduce_bf16)
    : nccl_(nccl),
      grads_(grads),
      scratch_(bf16_scratch),
      buckets_(std::move(buckets)),
      reduce_bf16_(reduce_bf16),
      launched_(buckets_.size(), false) {
  // Higher priority than compute, so a ready bucket's kernels start before more backward work.
  int lo = 0, hi = 0;
  RY_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  RY_CUDA(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, hi));
  ready_.resize(buckets_.size());
  for (cudaEvent_t& e : ready_) RY_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  RY_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

GradientExchange::~GradientExchange() {
  for (cudaEvent_t e : ready_) cudaEventDestroy(e);
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void GradientExchange::launch(size_t i, cudaStream_t compute) {
  const GradBucket& b = buckets_.at(i);
  RY_CUDA(cudaEventRecord(ready_[i], compute));
  RY_CUDA(cudaStreamWaitEvent(stream_, ready_[i], 0));
  size_t n = b.end - b.begin;
  if (reduce_bf16_) {
    convert(scratch_ + b.begin, grads_ + b.begin, n, stream_);
    nccl_.all_reduce_mean(scratch_ + b.begin, n, ncclBfloat16, stream_);
    convert(grads_ + b.begin, scratch_ + b.begin, n, stream_);
  } else {
    nccl_.all_reduce_mean(grads_ + b.begin, n, ncclFloat32, stream_);
  }
  launched_[i] = true;
}

void GradientExchange::finish(cudaStream_t compute) {
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (!launched_[i]) launch(i, compute);
  }
  RY_CUDA(cudaEventRecord(done_, stream_));
  RY_CUDA(cudaStreamWaitEvent(compute, done_, 0));
  launched_.assign(buckets_.size(), false);
}

}  // namespace railyard::cuda
