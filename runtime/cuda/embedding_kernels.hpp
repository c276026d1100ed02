#pragma once
// Token + position embedding, forward and backward. The backward pass sums each vocabulary
// row's gradient in a fixed order (positions sorted by token, ties by position: the host's
// TokenOrder, token_order.hpp, staged with the batch; one warp group per distinct token adds its
// rows in position order): no float atomics, so the same bits every run.

#include <cuda_runtime.h>

#include <cstdint>

namespace railyard::cuda {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; C a multiple of 16 / sizeof(T) (16-byte
// vectors; std::invalid_argument otherwise), every row on a 16-byte boundary.
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C, cudaStream_t stream);

// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] (+= with accumulate_wpe, else =) sum over b of
// dout[b,t,:] (fp32 grads). sorted_tokens and sorted_positions hold the B * Tn positions sorted
// by token, ties by position (TokenOrder::sort); C is a multiple of 8 and dwte, dwpe are 16-byte
// aligned (16-byte packs).
template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const uint32_t* sorted_tokens,
                        const uint32_t* sorted_positions, int B, int Tn, int C, bool accumulate_wpe,
                        cudaStream_t stream);

}  // namespace railyard::cuda
