#pragma once
// The LM head's loss kernel as it was before issue 12's cross-entropy change (branch
// issue-12-ce2): two blocks of 512 threads per multiprocessor, each staging one row in shared
// memory with 16-byte cp.async copies per thread. Kept for cross_entropy_bench only, which times
// it beside the engine's kernel (runtime/cuda/cross_entropy_kernels.cu).

#include <cuda_runtime.h>

#include <cstdint>

namespace railyard::bench {

// cross_entropy_forward_backward with the gradient, the old way. Throws std::invalid_argument
// where a row of Vp columns of T does not fit the device's shared memory per block.
template <typename T>
void cross_entropy_staged_reference(T* logits, float* losses, const int32_t* targets, int N, int V,
                                    int Vp, float dscale, cudaStream_t stream);

}  // namespace railyard::bench
