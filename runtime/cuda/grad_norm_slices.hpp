#pragma once
// The gradient norm's sum of squares computed slice by slice beside the backward. The gradients
// are cut into the gradient exchange's buckets (a layer each, the embeddings, the final
// LayerNorm). As soon as a bucket is final (its backward done, or its all-reduce done where
// there is an exchange), beside() sums its squares on a stream of its own, overlapping the
// backward of the layers below; only the bucket final last (the embeddings: wte gets the
// embedding backward at the very end) is left for finish(), on the compute stream.
//
// Bits: each bucket's partition into blocks and its slots are fixed at construction, and
// finish() adds all the slots in one fixed order, so the norm is the same bits whether the
// buckets ran beside the backward, eagerly or in a CUDA graph, or all in finish(). No atomics.
//
// Inside a captured phase, beside() forks the side stream from the capturing one and join()
// joins it back, so the capture stays valid; join() must come before the phase ends.

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "grad_bucket.hpp"
#include "side_stream.hpp"

namespace railyard::cuda {

class GradNormSlices {
 public:
  // Doubles of slots the buckets need (the engine plans them with its other scratch).
  static size_t slots_needed(const std::vector<GradBucket>& buckets, size_t tail);
  // `buckets` partition `grads`; `tail` is the bucket final last; `slots` holds
  // slots_needed(buckets, tail) doubles.
  GradNormSlices(const float* grads, double* slots, const std::vector<GradBucket>& buckets,
                 size_t tail);

  // Bucket i (not the tail) is final once the work queued on `ready` so far has run: its sum of
  // squares is queued on the side stream after that work.
  void beside(size_t i, cudaStream_t ready);
  // `compute` waits for everything beside() queued.
  void join(cudaStream_t compute);
  // *out = the sum of squares of all the gradients, on `compute`: the tail bucket, and every
  // other one too unless `beside_done` (beside() ran for each, and join() since).
  void finish(double* out, cudaStream_t compute, bool beside_done);

 private:
  struct Slice {
    size_t begin, end;  // elements of the gradients
    size_t slot;        // its first slot
    size_t blocks;      // the most blocks it runs on (fixes its partition)
  };
  void sum_slice(const Slice& s, cudaStream_t stream) const;

  const float* grads_;
  double* slots_;
  std::vector<Slice> slices_;
  size_t tail_, total_slots_ = 0;
  SideStream side_;  // where beside() queues the buckets' sums
};

}  // namespace railyard::cuda
