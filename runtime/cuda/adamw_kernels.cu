#include "adamw_kernels.hpp"
#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

template <typename T>
__global__ void adamw_kernel(float* params, T* compute, float* m, float* v, const float* grads,
                             const uint32_t* decay, size_t n, AdamWStep s) {
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
    if (compute != nullptr) compute[i] = from_f<T>(p);
  }
}

}  // namespace

std::vector<uint32_t> pack_decay_mask(const std::vector<uint8_t>& decay) {
  std::vector<uint32_t> bits(decay_mask_words(decay.size()), 0);
  for (size_t i = 0; i < decay.size(); ++i) {
    if (decay[i] != 0) bits[i / 32] |= uint32_t{1} << (i % 32);
  }
  return bits;
}

template <typename T>
void adamw_update(float* params, T* compute, float* m, float* v, const float* grads,
                  const uint32_t* decay, size_t n, const AdamWStep& s, cudaStream_t stream) {
  if (n == 0) return;
  size_t b = (n + 255) / 256;
  adamw_kernel<T><<<static_cast<int>(b < 65536 ? b : 65536), 256, 0, stream>>>(
      params, compute, m, v, grads, decay, n, s);
  RY_CUDA_LAUNCHED();
}

template void adamw_update<float>(float*, float*, float*, float*, const float*, const uint32_t*,
                                  size_t, const AdamWStep&, cudaStream_t);
template void adamw_update<bf16>(float*, bf16*, float*, float*, const float*, const uint32_t*,
                                 size_t, const AdamWStep&, cudaStream_t);

}  // namespace railyard::cuda
