#pragma once
// The loss kernel's alternatives to the staged kernel (CrossEntropyStaged in
// cross_entropy_kernels.hpp), launched by cross_entropy_forward_backward; each with the gradient,
// each summing a row in one fixed order (the same bits run to run).

#include <cuda_runtime.h>

#include <cstdint>

namespace railyard::cuda {

// A row per cluster of `cluster` (2 or 4) blocks, each staging its slice of the row. Returns
// false, launching nothing, where a slice does not fit the device's shared memory.
template <typename T>
bool cross_entropy_cluster(int cluster, T* logits, float* losses, const int32_t* targets, int N,
                           int V, int Vp, float dscale, cudaStream_t stream);
// Cluster blocks in the persistent grid for rows of Vp columns (0: does not fit).
template <typename T>
int cross_entropy_cluster_grid(int cluster, int Vp);

// A row per block of `threads` (512: 2 blocks a multiprocessor; 1024: 1), read from device
// memory for the sums and again from L2 for the gradient.
template <typename T>
void cross_entropy_l2(int threads, T* logits, float* losses, const int32_t* targets, int N, int V,
                      int Vp, float dscale, cudaStream_t stream);

}  // namespace railyard::cuda
