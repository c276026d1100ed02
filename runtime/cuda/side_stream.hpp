#pragma once
// A second stream, of the least priority, for work that nothing else in the phase waits on until
// a known point: the gradient norm's sums of the buckets the backward has finished
// (grad_norm_slices.hpp). fork() orders the side stream after everything queued so far on the
// given stream; join() orders that stream after everything queued on the side since. Both are
// event record/wait pairs, so they work eagerly and inside a CUDA-graph capture (where they
// become the graph's edges); a capture must join every fork before it ends. Each edge costs:
// the bias gradients on such a stream, forked and joined twice per layer, made the step 0.2 ms
// slower (bench/NOTES.md), so a fork should carry work the main stream does not wait for soon.

#include <cuda_runtime.h>

namespace railyard::cuda {

// One step above the least priority, where the device has more than one: for the stream whose
// work a SideStream's should yield to.
int main_stream_priority();

class SideStream {
 public:
  // The main stream should have a higher priority (main_stream_priority()).
  SideStream();
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  // The side stream, after `main`'s work so far.
  cudaStream_t fork(cudaStream_t main);
  // `main`'s later work waits for the side stream's work so far.
  void join(cudaStream_t main);

 private:
  cudaStream_t side_ = nullptr;
  cudaEvent_t forked_ = nullptr, done_ = nullptr;
};

}  // namespace railyard::cuda
