#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "cross_entropy_kernels.hpp"
#include "cross_entropy_row.cuh"
#include "cuda_check.hpp"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

constexpr int kThreads = 512;

// One block per row, 16-byte packs (Vp is a multiple of 8); the padding columns [V, Vp) are
// skipped in the sums and get gradient 0. The row is read twice with the gradient (rows too long
// to stage), once without.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(T* logits, float* losses, const int32_t* targets, int V, int Vp,
                         float dscale, bool write_grad) {
  constexpr int kN = Pack<T>::kN;
  T* x = logits + size_t(blockIdx.x) * Vp;
  const int tgt = targets[blockIdx.x];
  float m = -INFINITY, s = 0.0f;
  for (int j0 = threadIdx.x * kN; j0 < V; j0 += blockDim.x * kN) {
    accumulate(m, s, load_pack(x + j0), j0, V);
  }
  const float2 r = finish_row(m, s, losses + blockIdx.x, tgt < 0 ? 0.0f : to_f(x[tgt]), tgt);
  if (!write_grad) return;
  for (int j0 = threadIdx.x * kN; j0 < Vp; j0 += blockDim.x * kN) {
    store_pack(x + j0, gradient(load_pack(x + j0), j0, V, tgt, r.x, r.y * dscale, dscale));
  }
}

// The staged kernel: one block of 1024 threads per multiprocessor (64 registers each), rows in
// shared memory, copied there by the Tensor Memory Accelerator (cp.async.bulk, sm_90), which
// signals an mbarrier when a row's bytes have all landed.
constexpr int kStagedThreads = 1024;
constexpr int kMaxBuffers = 2;
constexpr unsigned kCopyBytes = 16384;  // one bulk copy: a round of 1024 16-byte packs

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// An mbarrier that completes a phase once one thread has arrived and the bytes it announced
// have landed; the initialisation made visible to the copy engine (the async proxy).
__device__ __forceinline__ void init_landed(uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// Copies bytes [begin, end) of a row from src to dst (shared memory), completing on bar. The
// first piece of a row (announce) also arrives on bar with the row's byte count, so the phase
// completes only when every piece of the row has landed, however they are spread in time.
__device__ __forceinline__ void copy_row_piece(void* dst, const void* src, unsigned begin,
                                               unsigned end, unsigned row_bytes, bool announce,
                                               uint64_t* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (announce) {
    asm volatile(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)),
        "r"(row_bytes)
        : "memory");
  }
  for (unsigned o = begin; o < end; o += kCopyBytes) {
    const unsigned n = min(kCopyBytes, end - o);
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"(shared_address(static_cast<char*>(dst) + o)),
        "l"(__cvta_generic_to_global(static_cast<const char*>(src) + o)), "r"(n),
        "r"(shared_address(bar))
        : "memory");
  }
#endif
}

// Waits until the phase of bar with the given parity has completed (the row has landed).
__device__ __forceinline__ void wait_landed(uint64_t* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
#endif
}

// The gradient with rows staged in shared memory: read from device memory once. Persistent:
// block b takes rows b, b + gridDim.x, ..., the k-th of them in buffer k % buffers. With two
// buffers the copy of a row starts a whole row ahead (when the gradient of the row two back
// has been read out of its buffer), so the copy engine keeps a row's bytes in flight per
// multiprocessor while its threads sum and write the other row: memory never waits for a
// phase of the arithmetic. With one buffer (rows above half the shared memory: fp32 GPT-2), the
// next row's copy follows the gradient round by round, each 1024-pack round once every thread
// has read it.
template <typename T>
__global__ void __launch_bounds__(kStagedThreads, 1)
    cross_entropy_staged_kernel(T* logits, float* losses, const int32_t* targets, int N, int V,
                                int Vp, float dscale, int buffers) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kN = Pack<T>::kN;
  extern __shared__ __align__(128) unsigned char staged[];
  __shared__ uint64_t landed[kMaxBuffers];
  const int packs = Vp / kN, rounds = (packs + blockDim.x - 1) / blockDim.x;
  const unsigned row_bytes = unsigned(Vp) * sizeof(T);
  const unsigned round_bytes = blockDim.x * sizeof(Pack<T>);
  if (threadIdx.x == 0) {
    for (int b = 0; b < buffers; ++b) init_landed(&landed[b]);
    for (int b = 0; b < buffers && blockIdx.x + b * gridDim.x < N; ++b) {
      copy_row_piece(staged + size_t(b) * row_bytes,
                     logits + size_t(blockIdx.x + b * gridDim.x) * Vp, 0, row_bytes, row_bytes,
                     true, &landed[b]);
    }
  }
  __syncthreads();  // the mbarriers are initialised
  int k = 0;
  for (int n = blockIdx.x; n < N; n += gridDim.x, ++k) {
    const int b = k % buffers;
    Pack<T>* row = reinterpret_cast<Pack<T>*>(staged + size_t(b) * row_bytes);
    wait_landed(&landed[b], unsigned(k / buffers) & 1u);
    T* x = logits + size_t(n) * Vp;
    const int tgt = targets[n];
    float m = -INFINITY, s = 0.0f;
    for (int q = threadIdx.x; q < packs; q += blockDim.x) accumulate(m, s, row[q], q * kN, V);
    const float target_logit =
        threadIdx.x == 0 && tgt >= 0 ? to_f(reinterpret_cast<const T*>(row)[tgt]) : 0.0f;
    const float2 st = finish_row(m, s, losses + n, target_logit, tgt);
    const int next = n + buffers * gridDim.x;  // the row that takes this buffer next
    const T* src = next < N ? logits + size_t(next) * Vp : nullptr;
    for (int r = 0; r < rounds; ++r) {
      const int q = threadIdx.x + r * blockDim.x;
      if (q < packs) {
        store_pack(x + q * kN, gradient(row[q], q * kN, V, tgt, st.x, st.y * dscale, dscale));
      }
      if (buffers == 1 || r == rounds - 1) {
        __syncthreads();  // rounds up to r read out of the buffer by every thread
        if (threadIdx.x == 0 && src != nullptr) {
          const unsigned begin = buffers == 1 ? r * round_bytes : 0;
          copy_row_piece(row, src, begin, min(row_bytes, (r + 1) * round_bytes), row_bytes,
                         begin == 0, &landed[b]);
        }
      }
    }
  }
#else
  __trap();  // not reached: staged_launch gives 0 buffers below sm_90
#endif
}

// How the staged kernel runs for rows of row_bytes on the current device: how many rows a
// block's shared memory holds (2, 1, or 0 where a row does not fit or the device has no bulk
// copies, before sm_90: then the rows are read twice). Worked out (and the kernel's
// shared-memory limit raised) once per device and row size, in the first call, which the engine
// makes eagerly: not inside a graph capture.
struct StagedLaunch {
  int device = -1;
  size_t row_bytes = 0;
  int buffers = 0;
  int multiprocessors = 0;
};

template <typename T>
StagedLaunch staged_launch(size_t row_bytes) {
  static std::mutex mu;
  static std::vector<StagedLaunch> known;  // one per device and row size seen: a handful
  int dev = 0;
  RY_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  for (const StagedLaunch& k : known) {
    if (k.device == dev && k.row_bytes == row_bytes) return k;
  }
  StagedLaunch l{dev, row_bytes, 0, 0};
  int optin = 0;
  RY_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  RY_CUDA(cudaDeviceGetAttribute(&l.multiprocessors, cudaDevAttrMultiProcessorCount, dev));
  cudaFuncAttributes fa{};
  RY_CUDA(cudaFuncGetAttributes(&fa, cross_entropy_staged_kernel<T>));
  // The limit is the kernel's, not the launch's: raised to all the device allows, so that a
  // launch for any row size seen before still may use its shared memory.
  const size_t fits = size_t(optin) - fa.sharedSizeBytes;
  // Both the code's target (PTX) and the binary the device runs must be sm_90 or later: built
  // for an older target, the kernel is empty (staged_rows 0, never launched).
  int buffers = fa.ptxVersion >= 90 && fa.binaryVersion >= 90 ? kMaxBuffers : 0;
  while (buffers > 0 && buffers * row_bytes > fits) --buffers;
  if (buffers > 0) {
    RY_CUDA(cudaFuncSetAttribute(cross_entropy_staged_kernel<T>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, int(fits)));
    int blocks = 0;
    RY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, cross_entropy_staged_kernel<T>,
                                                          kStagedThreads, buffers * row_bytes));
    l.buffers = blocks > 0 ? buffers : 0;
  }
  known.push_back(l);
  return l;
}

}  // namespace

template <typename T>
int cross_entropy_staged_rows(int Vp) {
  return staged_launch<T>(size_t(Vp) * sizeof(T)).buffers;
}

template <typename T>
void cross_entropy_forward_backward(T* logits, float* losses, const int32_t* targets, int N, int V,
                                    int Vp, float dscale, bool write_grad, cudaStream_t stream) {
  if (Vp % Pack<T>::kN != 0 || reinterpret_cast<uintptr_t>(logits) % 16 != 0) {
    throw std::invalid_argument("cross-entropy: logits rows of " + std::to_string(Vp) +
                                " columns at " +
                                std::to_string(reinterpret_cast<uintptr_t>(logits)) +
                                " are not whole 16-byte packs on a 16-byte boundary: pad the"
                                " vocabulary to a multiple of " +
                                std::to_string(Pack<T>::kN) + " and align the buffer");
  }
  if (N <= 0) return;
  const size_t row_bytes = size_t(Vp) * sizeof(T);
  // Without the gradient the plain kernel reads each row once already.
  const StagedLaunch l = write_grad ? staged_launch<T>(row_bytes) : StagedLaunch{};
  if (l.buffers > 0) {
    const int grid = std::min(N, l.multiprocessors);
    cross_entropy_staged_kernel<T><<<grid, kStagedThreads, l.buffers * row_bytes, stream>>>(
        logits, losses, targets, N, V, Vp, dscale, l.buffers);
  } else {
    cross_entropy_kernel<T>
        <<<N, kThreads, 0, stream>>>(logits, losses, targets, V, Vp, dscale, write_grad);
  }
  RY_CUDA_LAUNCHED();
}

template int cross_entropy_staged_rows<float>(int);
template int cross_entropy_staged_rows<bf16>(int);
template void cross_entropy_forward_backward<float>(float*, float*, const int32_t*, int, int, int,
                                                    float, bool, cudaStream_t);
template void cross_entropy_forward_backward<bf16>(bf16*, float*, const int32_t*, int, int, int,
                                                   float, bool, cudaStream_t);

}  // namespace railyard::cuda
