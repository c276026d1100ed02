#pragma once
// Token + position embedding, forward and backward.

#include <cuda_runtime.h>

#include <cstdint>

namespace railyard::cuda {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C, cudaStream_t stream);
// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += sum over b of dout[b,t,:] (fp32 grads).
template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const int32_t* tokens, int B,
                        int Tn, int C, cudaStream_t stream);

}  // namespace railyard::cuda
