#pragma once
// AdamW on the fp32 master weights (decoupled weight decay, as torch.optim.AdamW), refreshing
// the compute copy in the same pass.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace railyard::cuda {

struct AdamWStep {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  float bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^t
  float grad_scale = 1;                              // the clip factor
  // When set, also multiplies the gradient: a clip factor computed on the device, so the
  // update needs no round trip to the host.
  const float* device_grad_scale = nullptr;
};

// Where weight decay applies, one bit per element (bit i % 32 of word i / 32): 16 MB instead of
// 125 MB of bytes for GPT-2 small's state.
std::vector<uint32_t> pack_decay_mask(const std::vector<uint8_t>& decay);
inline size_t decay_mask_words(size_t n) {
  return (n + 31) / 32;
}

// n elements; bit i of decay (pack_decay_mask) set where weight decay applies. compute (may be
// null) gets the new weights in its type. params, m, v and grads start on a 16-byte boundary,
// compute on 4 elements' (the engine's shards do: they start on ParamLayout::kAlign elements);
// throws std::invalid_argument otherwise. Bit for bit the update of the engine's first kernel
// (one element per thread), read and written in 16-byte vectors (adamw_streaming.cuh).
template <typename T>
void adamw_update(float* params, T* compute, float* m, float* v, const float* grads,
                  const uint32_t* decay, size_t n, const AdamWStep& s, cudaStream_t stream);

}  // namespace railyard::cuda
