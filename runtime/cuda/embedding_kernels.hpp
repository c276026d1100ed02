#pragma once
// Token + position embedding, forward and backward. The backward pass sums each vocabulary
// row's gradient in a fixed order (positions sorted by token with a stable radix sort, then one
// block per distinct token adds its rows in position order): no float atomics, so the same
// bits every run.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace railyard::cuda {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; C a multiple of 16 / sizeof(T) (16-byte
// vectors; std::invalid_argument otherwise), every row on a 16-byte boundary.
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C, cudaStream_t stream);

// Bytes of scratch embedding_backward needs for N = B * Tn tokens below `vocab`.
size_t embedding_backward_scratch_bytes(int N, int vocab);

// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] (+= with accumulate_wpe, else =) sum over b of
// dout[b,t,:] (fp32 grads). Tokens must lie in [0, vocab); scratch holds
// embedding_backward_scratch_bytes(B * Tn, vocab) bytes; C is a multiple of 8 and dwte, dwpe
// are 16-byte aligned (16-byte packs).
template <typename T>
void embedding_backward(float* dwte, float* dwpe, void* scratch, const T* dout,
                        const int32_t* tokens, int B, int Tn, int C, int vocab, bool accumulate_wpe,
                        cudaStream_t stream);

}  // namespace railyard::cuda
