#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "async_copy.cuh"
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

// The gradient with the row staged in shared memory, so it is read from device memory once.
// Persistent: block b takes rows b, b + gridDim.x, ... Each thread only ever touches its own
// packs of the staged row (the same q in the copy, the sums and the gradient), so the buffer
// needs no barrier; once it has written the gradient of a pack it starts the copy of that pack
// of its block's next row into the same slot, so the next row's read overlaps this row's writes.
// The sums run in the same order as in cross_entropy_kernel: the same bits.
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
    const float target_logit = threadIdx.x == 0 && tgt >= 0 ? to_f(x[tgt]) : 0.0f;
    float m = -INFINITY, s = 0.0f;
    for (int r = 0; r < rounds; ++r) {
      wait_async(rounds - 1 - r);  // round r has landed
      const int q = threadIdx.x + r * blockDim.x;
      if (q < packs) {
        const Pack<T> p = row[q];  // one 16-byte read, not one per element
        accumulate(m, s, p, q * kN, V);
      }
    }
    const float2 st = finish_row(m, s, losses + n, target_logit, tgt);
    const T* next = n + gridDim.x < N ? x + size_t(gridDim.x) * Vp : nullptr;
    for (int r = 0; r < rounds; ++r) {
      const int q = threadIdx.x + r * blockDim.x;
      if (q < packs) {
        store_pack(x + q * kN, gradient(row[q], q * kN, V, tgt, st.x, st.y * dscale, dscale));
        // The slot's old value is in the store above, which waited for it: safe to overwrite.
        if (next != nullptr) copy_async16(row + q, next + q * kN);
      }
      commit_async();
    }
  }
}

// How the staged kernel runs for rows of row_bytes on the current device: how many blocks (one
// row each) a multiprocessor holds, 0 where a row does not fit the device's shared memory per
// block (then the rows are read twice). Worked out (and the kernel's shared-memory limit raised)
// once per device and row size, in the first call, which the engine makes eagerly: not inside a
// graph capture.
struct StagedLaunch {
  int device = -1;
  size_t row_bytes = 0;
  int blocks_per_sm = 0;
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
  if (row_bytes <= fits) {
    RY_CUDA(cudaFuncSetAttribute(cross_entropy_staged_kernel<T>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, int(fits)));
    RY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &l.blocks_per_sm, cross_entropy_staged_kernel<T>, kThreads, row_bytes));
  }
  known.push_back(l);
  return l;
}

}  // namespace

template <typename T>
int cross_entropy_staged_rows(int Vp) {
  return staged_launch<T>(size_t(Vp) * sizeof(T)).blocks_per_sm;
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
  if (l.blocks_per_sm > 0) {
    const int grid = std::min(N, l.blocks_per_sm * l.multiprocessors);
    cross_entropy_staged_kernel<T>
        <<<grid, kThreads, row_bytes, stream>>>(logits, losses, targets, N, V, Vp, dscale);
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
