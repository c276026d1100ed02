#pragma once
// Sum of squares of the fp32 gradients, the input of global-norm clipping.

#include <cuda_runtime.h>

#include <cstddef>

namespace railyard::cuda {

// *out += sum of g[i]^2 over n elements (accumulated in double; zero *out first).
void grad_sumsq(double* out, const float* g, size_t n, cudaStream_t stream);
// *scale = min(1, clip / (sqrt(*sumsq) + 1e-6)) in double, as railyard::clip_factor; 1 when
// clip <= 0.
void clip_factor_on_device(float* scale, const double* sumsq, float clip, cudaStream_t stream);

}  // namespace railyard::cuda
