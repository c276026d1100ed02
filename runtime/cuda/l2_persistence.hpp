#pragma once
// One buffer kept in the GPU's L2 cache across kernels: the device's persisting L2 set-aside is
// sized to it and `stream`'s access-policy window marks its accesses persisting (other accesses
// stream as before). Kernels captured from the stream into a graph carry the window with them.
// Where a buffer is read and rewritten by kernels with other large traffic between them (the
// residual gradient of the backward, between the products), its lines then survive the products'
// streams instead of going back to HBM each time. Only where the lines live changes: the same
// bits.

#include <cuda_runtime.h>

#include <cstddef>

namespace railyard::cuda {

// Keeps [base, base + bytes) in L2 for work queued on `stream` on `device`, as much of it as
// the device allows (a window over the first bytes when it allows fewer). Returns the bytes
// kept: 0 where the device has no persisting L2 (before compute capability 8.0). Throws
// std::runtime_error naming the CUDA call that failed.
size_t keep_in_l2(cudaStream_t stream, int device, const void* base, size_t bytes);

}  // namespace railyard::cuda
