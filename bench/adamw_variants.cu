#include <algorithm>

#include "adamw_streaming.cuh"
#include "adamw_variants.hpp"
#include "cuda_check.hpp"

namespace railyard::bench {

using railyard::cuda::AdamWStep;
using bf16 = __nv_bfloat16;

namespace {

constexpr int kThreads = 256;

// runtime/cuda/adamw_kernels.cu's kernel as it was before issue 12, unchanged: the reference.
template <typename T>
__global__ void adamw_reference_kernel(float* params, T* compute, float* m, float* v,
                                       const float* grads, const uint32_t* decay, size_t n,
                                       AdamWStep s) {
  const float scale = s.grad_scale * (s.device_grad_scale != nullptr ? *s.device_grad_scale : 1.0f);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float g = grads[i] * scale;
    float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g;
    float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float p = params[i];
    if ((decay[i / 32] >> (i % 32)) & 1u) p *= 1.0f - s.lr * s.weight_decay;
    float mhat = mi / s.bias_correction1;
    float vhat = vi / s.bias_correction2;
    p -= s.lr * mhat / (sqrtf(vhat) + s.eps);
    params[i] = p;
    if (compute != nullptr) compute[i] = railyard::cuda::from_f<T>(p);
  }
}

void reference(const AdamWOperands& o, const AdamWStep& s, cudaStream_t stream) {
  const size_t b = (o.n + kThreads - 1) / kThreads;
  adamw_reference_kernel<bf16><<<static_cast<int>(b < 65536 ? b : 65536), kThreads, 0, stream>>>(
      o.params, o.compute, o.m, o.v, o.grads, o.decay, o.n, s);
  RY_CUDA_LAUNCHED();
}

// The streaming kernel with kQuads quads per thread and round; kOneWave: a grid of the blocks
// resident at once, each thread looping; otherwise one block per kQuads * kThreads quads.
template <int kQuads, bool kStream, bool kOneWave>
void streaming(const AdamWOperands& o, const AdamWStep& s, cudaStream_t stream) {
  auto kernel = railyard::cuda::adamw_streaming_kernel<bf16, kQuads, kStream>;
  const size_t per_block = size_t(kQuads) * kThreads;
  size_t grid = (o.n / 4 + per_block - 1) / per_block;
  if (kOneWave) grid = std::min(grid, size_t(railyard::cuda::resident_blocks(kernel, kThreads)));
  kernel<<<static_cast<unsigned>(std::max<size_t>(grid, 1)), kThreads, 0, stream>>>(
      o.params, o.compute, o.m, o.v, o.grads, o.decay, o.n, s);
  RY_CUDA_LAUNCHED();
}

void engine(const AdamWOperands& o, const AdamWStep& s, cudaStream_t stream) {
  railyard::cuda::adamw_update(o.params, o.compute, o.m, o.v, o.grads, o.decay, o.n, s, stream);
}

__global__ void hold_kernel(unsigned microseconds) {
  for (unsigned i = 0; i < microseconds; ++i) __nanosleep(1000);
}

}  // namespace

void hold_stream(unsigned microseconds, cudaStream_t stream) {
  hold_kernel<<<1, 1, 0, stream>>>(microseconds);
  RY_CUDA_LAUNCHED();
}

std::vector<AdamWVariant> adamw_variants() {
  return {
      {"reference", "1 element per thread, 65536 x 256, grid-stride", reference},
      {"vec4", "16-byte loads, 1 quad per thread, one block per 256 quads",
       streaming<1, false, false>},
      {"vec4_stream", "as vec4, evict-first loads and stores (__ldcs/__stcs)",
       streaming<1, true, false>},
      {"vec4_stream_wave", "as vec4_stream, one wave of resident blocks, grid-stride",
       streaming<1, true, true>},
      {"engine", "railyard::cuda::adamw_update as built", engine},
  };
}

}  // namespace railyard::bench
