#include "side_stream.hpp"

#include "cuda_check.hpp"

namespace railyard::cuda {

int main_stream_priority() {
  int least = 0, greatest = 0;
  RY_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // Greater priorities are smaller numbers.
  return greatest < least ? least - 1 : least;
}

SideStream::SideStream() {
  // The least priority: where both streams have blocks waiting, the main stream's (the step's
  // critical path) start first, and the side stream's fill what is left.
  int least = 0, greatest = 0;
  RY_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  RY_CUDA(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, least));
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
