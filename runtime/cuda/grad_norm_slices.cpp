#include "grad_norm_slices.hpp"

#include <stdexcept>
#include <string>

#include "grad_norm_kernels.hpp"

namespace railyard::cuda {
namespace {

// A bucket summed beside the backward: 528 blocks (four per H200 multiprocessor), about 13k
// elements, a microsecond or two, each. The products are persistent kernels that hold every
// multiprocessor (bench/NOTES.md, the bias gradients on a side stream measured slower), so the
// side blocks run in the gaps between kernels: short blocks fill short gaps and delay a product
// waiting for a multiprocessor little, while fewer slots keep the final sum, on the critical
// path, short. The tail is on the critical path and fills the GPU.
constexpr size_t kBesideBlocks = 528;

size_t blocks_for(size_t i, size_t tail) {
  return i == tail ? grad_sumsq_full_blocks() : kBesideBlocks;
}

}  // namespace

size_t GradNormSlices::slots_needed(const std::vector<GradBucket>& buckets, size_t tail) {
  size_t n = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    n += grad_sumsq_slots(buckets[i].end - buckets[i].begin, blocks_for(i, tail));
  }
  return n;
}

GradNormSlices::GradNormSlices(const float* grads, double* slots,
                               const std::vector<GradBucket>& buckets, size_t tail)
    : grads_(grads), slots_(slots), tail_(tail) {
  if (tail >= buckets.size()) {
    throw std::logic_error("GradNormSlices: tail bucket " + std::to_string(tail) + " of " +
                           std::to_string(buckets.size()));
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    const GradBucket& b = buckets[i];
    slices_.push_back({b.begin, b.end, total_slots_, blocks_for(i, tail)});
    total_slots_ += grad_sumsq_slots(b.end - b.begin, blocks_for(i, tail));
  }
}

void GradNormSlices::sum_slice(const Slice& s, cudaStream_t stream) const {
  grad_sumsq_slice(slots_ + s.slot, grads_ + s.begin, s.end - s.begin, s.blocks, stream);
}

void GradNormSlices::beside(size_t i, cudaStream_t ready) {
  if (i == tail_) throw std::logic_error("GradNormSlices::beside: the tail is summed by finish()");
  sum_slice(slices_.at(i), side_.fork(ready));
}

void GradNormSlices::join(cudaStream_t compute) {
  side_.join(compute);
}

void GradNormSlices::finish(double* out, cudaStream_t compute, bool beside_done) {
  for (size_t i = 0; i < slices_.size(); ++i) {
    if (i == tail_ || !beside_done) sum_slice(slices_[i], compute);
  }
  sum_slots(out, slots_, total_slots_, compute);
}

}  // namespace railyard::cuda
