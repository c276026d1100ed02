#pragma once
// AdamW on the fp32 master weights (decoupled weight decay, as torch.optim.AdamW), refreshing
// the compute copy in the same pass.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace railyard::cuda {

struct AdamWStep {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  float bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^t
  float grad_scale = 1;                              // the clip factor
  // When set, also multiplies the gradient: a clip factor computed on the device, so the
  // update needs no round trip to the host.
  const float* device_grad_scale = nullptr;
};

// n elements; decay[i] != 0 where weight decay applies. compute (may be null) gets the new
// weights in its type.
template <typename T>
void adamw_update(float* params, T* compute, float* m, float* v, const float* grads,
                  const uint8_t* decay, size_t n, const AdamWStep& s, cudaStream_t stream);

}  // namespace railyard::cuda
