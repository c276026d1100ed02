#include <algorithm>
#include <stdexcept>
#include <string>

#include "cross_entropy_reference.hpp"
#include "cross_entropy_row.cuh"
#include "cuda_check.hpp"

namespace railyard::bench {

using railyard::cuda::bf16;
using railyard::cuda::Pack;

namespace {

constexpr int kThreads = 512;

// 16 bytes from device memory into shared memory without passing through registers (cp.async,
// sm_80 and later); both addresses 16-byte aligned.
__device__ __forceinline__ void copy_async16(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d),
               "l"(__cvta_generic_to_global(src))
               : "memory");
}
__device__ __forceinline__ void commit_async() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most `pending` of this thread's newest copy groups are in flight (the count is
// an immediate: above 7 it waits for a little more than it must).
__device__ __forceinline__ void wait_async(int pending) {
  switch (pending) {
    case 0:
      asm volatile("cp.async.wait_group 0;" ::: "memory");
      break;
    case 1:
      asm volatile("cp.async.wait_group 1;" ::: "memory");
      break;
    case 2:
      asm volatile("cp.async.wait_group 2;" ::: "memory");
      break;
    case 3:
      asm volatile("cp.async.wait_group 3;" ::: "memory");
      break;
    case 4:
      asm volatile("cp.async.wait_group 4;" ::: "memory");
      break;
    case 5:
      asm volatile("cp.async.wait_group 5;" ::: "memory");
      break;
    case 6:
      asm volatile("cp.async.wait_group 6;" ::: "memory");
      break;
    default:
      asm volatile("cp.async.wait_group 7;" ::: "memory");
      break;
  }
}

// Starts the copy of a row into shared memory: pack q = threadIdx.x + r * blockDim.x is copied
// by this thread in copy group r, one group per round (empty where q >= packs), so every thread
// has `rounds` groups in flight afterwards.
template <typename T>
__device__ __forceinline__ void stage_row(Pack<T>* row, const T* x, int packs, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    const int q = threadIdx.x + r * blockDim.x;
    if (q < packs) copy_async16(row + q, x + q * Pack<T>::kN);
    commit_async();
  }
}

// runtime/cuda/cross_entropy_kernels.cu's staged kernel before issue 12's cross-entropy change
// (branch issue-12-ce2), the reference: the row staged in shared memory, so it is read from
// device memory once.
// Persistent: block b takes rows b, b + gridDim.x, ... Each thread only ever touches its own
// packs of the staged row (the same q in the copy, the sums and the gradient), so the buffer
// needs no barrier; once it has written the gradient of a pack it starts the copy of that pack
// of its block's next row into the same slot, so the next row's read overlaps this row's writes.
template <typename T>
__global__ void __launch_bounds__(kThreads, 2)
    cross_entropy_staged_kernel(T* logits, float* losses, const int32_t* targets, int N, int V,
                                int Vp, float dscale) {
  constexpr int kN = Pack<T>::kN;
  extern __shared__ __align__(16) unsigned char staged[];
  Pack<T>* row = reinterpret_cast<Pack<T>*>(staged);
  const int packs = Vp / kN, rounds = (packs + blockDim.x - 1) / blockDim.x;
  stage_row(row, logits + size_t(blockIdx.x) * Vp, packs, rounds);  // the launch has <= N blocks
  for (int n = blockIdx.x; n < N; n += gridDim.x) {
    T* x = logits + size_t(n) * Vp;
    const int tgt = targets[n];
    // From device memory, loaded now and used after the sums: this row's values there are
    // overwritten only below, after finish_row's barriers.
    const float target_logit = threadIdx.x == 0 && tgt >= 0 ? cuda::to_f(x[tgt]) : 0.0f;
    float m = -INFINITY, s = 0.0f;
    for (int r = 0; r < rounds; ++r) {
      wait_async(rounds - 1 - r);  // round r has landed
      const int q = threadIdx.x + r * blockDim.x;
      if (q < packs) {
        const Pack<T> p = row[q];  // one 16-byte read, not one per element
        cuda::accumulate(m, s, p, q * kN, V);
      }
    }
    const float2 st = cuda::finish_row(m, s, losses + n, target_logit, tgt);
    const T* next = n + gridDim.x < N ? x + size_t(gridDim.x) * Vp : nullptr;
    for (int r = 0; r < rounds; ++r) {
      const int q = threadIdx.x + r * blockDim.x;
      if (q < packs) {
        cuda::store_pack(x + q * kN,
                         cuda::gradient(row[q], q * kN, V, tgt, st.x, st.y * dscale, dscale));
        // The slot's old value is in the store above, which waited for it: safe to overwrite.
        if (next != nullptr) copy_async16(row + q, next + q * kN);
      }
      commit_async();
    }
  }
}

}  // namespace

template <typename T>
void cross_entropy_staged_reference(T* logits, float* losses, const int32_t* targets, int N, int V,
                                    int Vp, float dscale, cudaStream_t stream) {
  int dev = 0, optin = 0, sms = 0, blocks = 0;
  RY_CUDA(cudaGetDevice(&dev));
  RY_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  RY_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaFuncAttributes fa{};
  RY_CUDA(cudaFuncGetAttributes(&fa, cross_entropy_staged_kernel<T>));
  const size_t row_bytes = size_t(Vp) * sizeof(T), fits = size_t(optin) - fa.sharedSizeBytes;
  if (row_bytes > fits) {
    throw std::invalid_argument("cross-entropy reference: a row of " + std::to_string(row_bytes) +
                                " bytes does not fit the " + std::to_string(fits) +
                                " bytes of shared memory per block: use a smaller vocabulary");
  }
  RY_CUDA(cudaFuncSetAttribute(cross_entropy_staged_kernel<T>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(fits)));
  RY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, cross_entropy_staged_kernel<T>,
                                                        kThreads, row_bytes));
  const int grid = std::min(N, std::max(blocks, 1) * sms);
  cross_entropy_staged_kernel<T>
      <<<grid, kThreads, row_bytes, stream>>>(logits, losses, targets, N, V, Vp, dscale);
  RY_CUDA_LAUNCHED();
}

template void cross_entropy_staged_reference<bf16>(bf16*, float*, const int32_t*, int, int, int,
                                                   float, cudaStream_t);

}  // namespace railyard::bench
