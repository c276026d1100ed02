#pragma once
// Copies from device memory into shared memory that bypass registers (cp.async, sm_80 and
// later), in groups a thread commits and waits for. A copy is visible to the thread that issued
// it once its group has been waited for; other threads need a barrier after that.

#include <cuda_runtime.h>

namespace railyard::cuda {

// 16 bytes into shared memory; both addresses 16-byte aligned.
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

// An L2 policy that marks lines evict-first (data read once), so that L2 keeps what the next
// kernels read; made once per thread, passed to copy_async16_hinted.
__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// copy_async16 with an L2 policy for the source's lines.
__device__ __forceinline__ void copy_async16_hinted(void* dst, const void* src,
                                                    unsigned long long policy) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(d),
               "l"(__cvta_generic_to_global(src)), "l"(policy)
               : "memory");
}
// 4 bytes into shared memory (.ca: only 16-byte copies may bypass L1); both addresses 4-byte
// aligned.
__device__ __forceinline__ void copy_async4(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d),
               "l"(__cvta_generic_to_global(src))
               : "memory");
}

}  // namespace railyard::cuda
