#pragma once
// A prototype deterministic causal attention backward for Hopper (issue 12, bench only): wgmma
// products from shared memory through CuTe, in the engine's layouts (attention_cudnn.hpp): qkv
// and dqkv [B, T, 3, H, 64], out and dout [B, T, H*64], the softmax statistics [B, H, T] fp32
// (natural-log log-sum-exp of the scaled scores). bf16, head dim 64, causal, scale 1/8, T a
// multiple of 128. Two kernels after the row dot products D: one per (key block, b, h) sums dK
// and dV over the query blocks, one per (query block, b, h) sums dQ over the key blocks; each
// sum runs in one CTA in a fixed order, so the results are the same bits every run (no atomics,
// no scratch). sm_90a only.

#include <cuda_runtime.h>

#include <cstddef>

#include "dtype.hpp"

namespace railyard::bench {

struct AttnBwdShape {
  int B = 0, T = 0, H = 0;  // head dim 64
};

// Throws std::invalid_argument where `s` is not one the kernels handle (T % 128, sizes).
void check_attn_bwd_shape(const AttnBwdShape& s);

// d[b, h, t] = sum over the head's 64 features of dout * out (fp32).
void attention_dot_do_o(float* d, const cuda::bf16* out, const cuda::bf16* dout,
                        const AttnBwdShape& s, cudaStream_t stream);

// Which of the two kernels a call runs (one alone: to time it).
enum class AttnBwdKernels { kBoth, kDkDv, kDq };

// dqkv from qkv, dout, the statistics `lse` and `d` (attention_dot_do_o's): the dK/dV kernel,
// then the dQ kernel, on `stream`. `warpgroups`: per CTA, each with 64 rows of its own (2: the
// two share the loads of the other side's blocks; 1: more CTAs per SM, each at its own pace).
void attention_backward_wgmma(cuda::bf16* dqkv, const cuda::bf16* qkv, const cuda::bf16* dout,
                              const float* lse, const float* d, const AttnBwdShape& s,
                              cudaStream_t stream, AttnBwdKernels which = AttnBwdKernels::kBoth,
                              int warpgroups = 2);

// What the kernels assume of CuTe's layouts, checked on the host: load_tile's swizzle is the
// K-major and the MN-major view of a tile, and the accumulator's registers are the RS A
// fragment's. The number of mismatches (0 expected).
size_t attention_backward_layout_mismatches();

// The reference statistics: lse[b, h, t] = log(sum over keys k <= t of exp(q.k / 8)), one thread
// per row in fp32 (slow; untimed).
void attention_lse_reference(float* lse, const cuda::bf16* qkv, const AttnBwdShape& s,
                             cudaStream_t stream);

}  // namespace railyard::bench
