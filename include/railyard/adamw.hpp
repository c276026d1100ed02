#pragma once
// AdamW with decoupled weight decay and global-norm gradient clipping, on host fp32 arrays.
// The semantics are PyTorch's (torch.optim.AdamW and clip_grad_norm_), which the CUDA engine
// reproduces:
//   clip factor k = min(1, clip / (norm + 1e-6))   (norm of all gradients, before clipping)
//   g' = k g;  m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2
//   p = p (1 - lr wd)          (decay tensors only: matrices and embeddings)
//   p = p - lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)

#include <cstddef>
#include <cstdint>

#include "railyard/param_layout.hpp"

namespace railyard {

struct AdamWParams {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float clip = 1.0f;  // global-norm clip; <= 0 disables
};

// Euclidean norm of g[0, n), accumulated in double in index order (deterministic).
double global_norm(const float* g, size_t n);

// The factor that scales gradients of norm `norm` to at most `clip`; 1 when clip <= 0.
float clip_factor(double norm, float clip);

// One AdamW step (t >= 1, the step count after this one) on n elements of one tensor, with the
// gradient multiplied by grad_mult (the clip factor) on the fly.
void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamWParams& hp,
                  float lr, float grad_mult, int64_t t, bool decay);

// adamw_update over every tensor of `layout` (flat arrays of layout.total() elements), with
// weight decay where the tensor's `decay` is set. Alignment padding is left untouched.
void adamw_step(const ParamLayout& layout, float* params, const float* grads, float* m, float* v,
                const AdamWParams& hp, float lr, float grad_mult, int64_t t);

}  // namespace railyard
