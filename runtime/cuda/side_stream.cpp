#include "side_stream.hpp"

#include "cuda_check.hpp"

namespace railyard::cuda {

SideStream::SideStream() {
  RY_CUDA(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  RY_CUDA(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  RY_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
}

SideStream::~SideStream() {
  cudaEventDestroy(done_);
  cudaEventDestroy(forked_);
  cudaStreamDestroy(side_);
}

cudaStream_t SideStream::fork(cudaStream_t main) {
  RY_CUDA(cudaEventRecord(forked_, main));
  RY_CUDA(cudaStreamWaitEvent(side_, forked_, 0));
  return side_;
}

void SideStream::join(cudaStream_t main) {
  RY_CUDA(cudaEventRecord(done_, side_));
  RY_CUDA(cudaStreamWaitEvent(main, done_, 0));
}

}  // namespace railyard::cuda
