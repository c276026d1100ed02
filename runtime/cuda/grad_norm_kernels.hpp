#pragma once
// Sum of squares of the fp32 gradients, the input of global-norm clipping.

#include <cuda_runtime.h>

#include <cstddef>

namespace railyard::cuda {

// Doubles of scratch grad_sumsq needs.
size_t grad_sumsq_partials();

// *out = sum of g[i]^2 over n elements: per-block sums into `partials` (grad_sumsq_partials()
// doubles), then added in a fixed order, so the norm, and the clip factor, has the same bits
// every run.
void grad_sumsq(double* out, double* partials, const float* g, size_t n, cudaStream_t stream);
// *scale = min(1, clip / (sqrt(*sumsq) + 1e-6)) in double, as railyard::clip_factor; 1 when
// clip <= 0.
void clip_factor_on_device(float* scale, const double* sumsq, float clip, cudaStream_t stream);

}  // namespace railyard::cuda
