#pragma once
// LayerNorm over the last dimension (eps 1e-5, as GPT-2). Statistics (mean, 1/std) are kept in
// fp32 for the backward pass. (The residual adds before the engine's LayerNorms are in the
// products' epilogues: Matmul::linear_forward's residual.)

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "fixed_order_sum.hpp"

namespace railyard::cuda {

inline constexpr float kLayerNormEps = 1e-5f;

// How the backward's first pass moves rows of at most 4 packs a lane (wider rows: one kernel).
// Both walk the same rows per warp in the same order and give the same bits every run, but not
// each other's bits (measured: the last bits of dx and of the sums differ; the checks hold each
// against float64). kStaged: each lane copies its packs into a ring of row slots (cp.async), w
// as fp32 in shared memory. kLean: the same copies, w kept in registers, the copies of the first
// rows started before w is loaded, dx rounded to bf16 two at a time.
enum class LayerNormBackwardKernel { kStaged, kLean };
// The engine's: kLean, 2 us a call less than kStaged in bench/layernorm_bench.cpp (bf16 16384 x
// 768), about 0.03 ms a step in the A/B (bench/NOTES.md 2026-12-03). kStaged stays the A/B's
// reference (one line).
inline constexpr LayerNormBackwardKernel kLayerNormBackwardKernel = LayerNormBackwardKernel::kLean;

// out = LN(x) * w + b over rows of C; out's rows ld_out apart (>= C, whole 16-byte packs), its
// columns past C left as they are (a Linear's ones column, ones_column_kernels.hpp).
template <typename T>
void layernorm_forward(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, int N,
                       int C, int ld_out, cudaStream_t stream);
// Floats of scratch layernorm_backward needs for N rows of C (with or without dsum).
size_t layernorm_backward_partials(int N, int C);

// dx (+)= dLN/dx^T dy; dw (+)= sum dy * xhat, db (+)= sum dy (fp32). With accumulate false, dx
// is overwritten; with accumulate_params false, dw and db are. With dsum not null, also
// dsum (+)= the column sums of dx as stored after this call (per accumulate_params): the bias
// gradient of the Linear layer whose output gradient dx is (GPT's residual stream), without
// reading dx again (rows too wide for a third slice of shared memory read it once more).
// The parameter sums run in two fixed-order passes through `partials`
// (layernorm_backward_partials(N, C) floats): the same bits every run. With `deferred`, the
// second pass is appended there instead of launched (sum_partial_columns of the batch later
// gives the same bits; until then `partials` must stay untouched and dw, db, dsum unread),
// except for rows too wide to fuse dsum, whose passes all run now.
// With dx_in (and accumulate), the dx added to is read from dx_in and the sum stored to dx,
// dx_in left as it was (another N x C buffer, not overlapping dx, or dx itself): the same
// arithmetic, the same bits as in place. The engine keeps an earlier residual gradient that
// way (cuda_engine.cpp, kProjWeightGroup). `kernel`: which first pass (the engine's unless a
// bench or check asks for another).
template <typename T>
void layernorm_backward(T* dx, float* dw, float* db, float* dsum, float* partials, const T* dy,
                        const T* x, const T* w, const float* mean, const float* rstd, int N, int C,
                        bool accumulate, bool accumulate_params, cudaStream_t stream,
                        std::vector<ColumnSums>* deferred = nullptr, const T* dx_in = nullptr,
                        LayerNormBackwardKernel kernel = kLayerNormBackwardKernel);

}  // namespace railyard::cuda
