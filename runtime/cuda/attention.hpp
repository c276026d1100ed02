#pragma once
// Causal multi-head self-attention through batched cuBLASLt products and a causal softmax
// kernel. Layouts: qkv is the QKV projection's output [B, T, 3, H, hd]; the kernels work on
// per-head copies [3][B, H, T, hd] and on the probabilities P [B, H, T, T], which the forward
// pass keeps for the backward pass.

#include <cuda_runtime.h>

#include <cstddef>

#include "matmul_cublaslt.hpp"

namespace railyard::cuda {

struct AttentionShape {
  int B = 0, T = 0, H = 0, hd = 0;
  size_t head_elems() const { return size_t(B) * H * T * hd; }  // one of q, k, v
  size_t prob_elems() const { return size_t(B) * H * T * T; }
};

// out[B, T, H*hd] = softmax(q k^T / sqrt(hd), causal) v. Saves qkvp (3 * head_elems) and
// probs (prob_elems); o_scratch holds head_elems.
template <typename T>
void attention_forward(Matmul& mm, T* out, T* qkvp, T* probs, T* o_scratch, const T* qkv,
                       const AttentionShape& s, cudaStream_t stream);

// dqkv[B, T, 3, H, hd] from dout[B, T, H*hd] and the saved qkvp, probs. Scratch: dqkvp
// (3 * head_elems), dprobs (prob_elems), do_scratch (head_elems).
template <typename T>
void attention_backward(Matmul& mm, T* dqkv, T* dqkvp, T* dprobs, T* do_scratch, const T* dout,
                        const T* qkvp, const T* probs, const AttentionShape& s,
                        cudaStream_t stream);

}  // namespace railyard::cuda
