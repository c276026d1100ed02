#pragma once
// Token + position embedding, forward and backward. The backward pass sums each vocabulary
// row's gradient in a fixed order (positions sorted by token, ties by position: the host's
// TokenOrder, token_order.hpp, staged with the batch): no float atomics, so the same bits every
// run. Two ways, of different bits: one warp group per distinct token adds its rows in position
// order (a frequent token is a long serial tail: 0.3 ms on text-like batches of GPT-2's), or the
// sorted batch in segments of 8 entries summed in parallel and the pieces of longer runs
// combined in a fixed order (wte_segments.hpp), with the wpe backward in the same launch.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace railyard::cuda {

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; C a multiple of 16 / sizeof(T) (16-byte
// vectors; std::invalid_argument otherwise), every row on a 16-byte boundary.
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C, cudaStream_t stream);

enum class WteBackward { kRunPerWarpGroup, kSegments };
// The engine's (the A/B switch: kRunPerWarpGroup, the way before, other bits).
inline constexpr WteBackward kEngineWteBackward = WteBackward::kSegments;

// Bytes of embedding_backward's scratch (the partials of kSegments) for a batch of B x Tn.
size_t embedding_backward_scratch_bytes(int B, int Tn, int C);

// dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] (+= with accumulate_wpe, else =) sum over b of
// dout[b,t,:] (fp32 grads). sorted_tokens and sorted_positions hold the B * Tn positions sorted
// by token, ties by position (TokenOrder::sort); C is a multiple of 8 and dwte, dwpe are 16-byte
// aligned (16-byte packs). `scratch` holds embedding_backward_scratch_bytes(B, Tn, C), 16-byte
// aligned, its content undefined before and after (kSegments only writes it).
template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const uint32_t* sorted_tokens,
                        const uint32_t* sorted_positions, float* scratch, int B, int Tn, int C,
                        bool accumulate_wpe, cudaStream_t stream,
                        WteBackward how = kEngineWteBackward);

}  // namespace railyard::cuda
