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

// Bulk copies (the Tensor Memory Accelerator, sm_90 and later): one thread starts a copy of a
// whole 16-byte-aligned run of bytes, whose arrival an mbarrier in shared memory counts; any
// thread then waits on the barrier's phase. The barrier is initialised once (count: the
// arrivals a phase needs), made visible by mbarrier_init_fence and a barrier of the threads
// that use it.
__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned count) {
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also tells the barrier how many bytes this phase's copies will bring.
__device__ __forceinline__ void mbarrier_arrive_expect(unsigned long long* bar, unsigned bytes) {
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes)
               : "memory");
}
// Whether the phase of parity `parity` (0 for the barrier's first, 1, 0, ...) has completed
// (the hardware may suspend the thread a little while before it answers no).
__device__ __forceinline__ bool mbarrier_try_wait(unsigned long long* bar, unsigned parity) {
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  unsigned done = 0;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      " selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(b), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits for that phase. A copy that never lands (a wrong byte count) traps after about 2^32
// clocks (2 s): a launch error rather than a hung GPU.
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
  if (mbarrier_try_wait(bar, parity)) return;
  const long long start = clock64();
  while (!mbarrier_try_wait(bar, parity)) {
    if (clock64() - start > (1LL << 32)) __trap();
  }
}
// Orders this thread's earlier shared-memory accesses before its later bulk copies (which
// write through another proxy): a slot read, then refilled.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global into shared memory,
// counted on `bar`, with an L2 policy for the source's lines.
__device__ __forceinline__ void copy_bulk_hinted(void* dst, const void* src, unsigned bytes,
                                                 unsigned long long* bar,
                                                 unsigned long long policy) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(d),
      "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(b), "l"(policy)
      : "memory");
}
// As copy_bulk_hinted, with L2's default policy.
__device__ __forceinline__ void copy_bulk(void* dst, const void* src, unsigned bytes,
                                          unsigned long long* bar) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const unsigned b = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(d),
      "l"(__cvta_generic_to_global(src)), "r"(bytes), "r"(b)
      : "memory");
}

}  // namespace railyard::cuda
