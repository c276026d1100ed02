#pragma once
// The GPT layers on CPU, forward and backward, as plain functions over row-major arrays.
// They are the reference every other backend is compared against. T is float (training) or
// double (the gradient checks); both are instantiated. Matrix products go to OpenBLAS.
//
// Conventions: N = B*T rows, C channels. Every backward ACCUMULATES (+=) into its gradient
// outputs, so callers zero them first; inputs of a backward are the forward's inputs and saved
// outputs. Loop orders and the products' blocks are fixed by the shapes, so results are the same
// bits for every thread count (cpu_parallel.hpp).

#include <cstdint>

namespace railyard::cpu {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:].  out [B,T,C], tokens [B,T], wte [V,C], wpe [>=T,C].
template <typename T>
void encoder_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                     int C);
// dwte[tokens[b,t],:] += dout[b,t,:], dwpe[t,:] += dout[b,t,:].
template <typename T>
void encoder_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tn, int C);

// LayerNorm over the last axis, eps 1e-5: out = (x - mean) * rstd * w + b.
// out, inp [N,C]; mean, rstd [N] (saved for backward); w, b [C].
template <typename T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int N,
                       int C);
// dinp [N,C], dw, db [C] accumulate; dout [N,C].
template <typename T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w,
                        const T* mean, const T* rstd, int N, int C);

// out = inp W^T + bias.  out [N,OC], inp [N,IC], w [OC,IC] (PyTorch layout), bias [OC] or null.
template <typename T>
void matmul_forward(T* out, const T* inp, const T* w, const T* bias, int N, int IC, int OC);
// dinp [N,IC] += dout W; dw [OC,IC] += dout^T inp; dbias [OC] += column sums of dout.
// dinp or dbias may be null (skipped).
template <typename T>
void matmul_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int N,
                     int IC, int OC);

// Causal multi-head self-attention, H heads of size C/H, scaled by 1/sqrt(C/H).
// qkv [B,T,3C]: q, k, v side by side, each [H, C/H]. out [B,T,C] (heads side by side).
// att [B,H,T,T]: the softmax probabilities, saved for backward (entries above the diagonal 0).
template <typename T>
void attention_forward(T* out, T* att, const T* qkv, int B, int Tn, int C, int H);
// dqkv [B,T,3C] accumulates.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, int B, int Tn, int C,
                        int H);

// GELU, tanh approximation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).  [n].
template <typename T>
void gelu_forward(T* out, const T* inp, int64_t n);
// dinp += gelu'(inp) * dout.
template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int64_t n);

// out = a + b.  [n].
template <typename T>
void residual_forward(T* out, const T* a, const T* b, int64_t n);
// da += dout; db += dout.
template <typename T>
void residual_backward(T* da, T* db, const T* dout, int64_t n);

// Softmax over the first V of Vp logit columns (columns V..Vp-1 are padding: probability 0,
// never predicted) and cross-entropy against targets. logits, probs [N,Vp] (probs may alias
// logits); losses [N]. A negative target means "ignore this position": loss 0, no gradient.
// Targets must be < V (the caller checks). Returns the number of positions not ignored.
template <typename T>
int softmax_crossentropy_forward(T* losses, T* probs, const T* logits, const int32_t* targets,
                                 int N, int V, int Vp);
// dlogits [N,Vp] = dlosses[i] * (probs - onehot(target)); padded columns and ignored rows get 0.
// Writes (does not accumulate): dlogits may alias probs.
template <typename T>
void softmax_crossentropy_backward(T* dlogits, const T* probs, const T* dlosses,
                                   const int32_t* targets, int N, int V, int Vp);

}  // namespace railyard::cpu
