// The loss with its gradient, a row per thread-block cluster (CrossEntropyStaged::kCluster2 and
// kCluster4). The staged kernel holds two 100 KB rows a multiprocessor in two blocks whose copy,
// sum and gradient phases can line up, leaving device memory idle; here each block stages only
// its slice of a row, so a multiprocessor holds 4 or 8 smaller blocks of as many rows, whose
// phases overlap more evenly. The slices' (max, sum) pairs meet through distributed shared
// memory behind one cluster barrier a row.
#include <cooperative_groups.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "cross_entropy_row.cuh"
#include "cross_entropy_variants.hpp"
#include "cuda_check.hpp"
#include "dtype.hpp"

namespace railyard::cuda {

namespace {

namespace cg = cooperative_groups;

// Threads a multiprocessor runs whatever the cluster: the staged kernel's 2 x 512.
constexpr int kThreadsPerSm = 1024;

// Packs of a row each block of a cluster of `cluster` stages (the last block's slice may be
// shorter).
template <typename T>
int slice_packs(int Vp, int cluster) {
  const int packs = Vp / Pack<T>::kN;
  return (packs + cluster - 1) / cluster;
}

// The row's pair from the cluster's blocks' pairs (`part`, by row parity so that one cluster
// barrier a row suffices: a slot is written again two rows later, after every block has passed
// the next row's barrier, i.e. has read it). Every thread of every block combines the same pairs
// in rank order: the same (max, sum) bits everywhere.
template <int kCs>
__device__ __forceinline__ float2 cluster_pair(float m, float s, float2 (&part)[2], int parity) {
  cg::cluster_group cluster = cg::this_cluster();
  block_pair(m, s);
  if (threadIdx.x == 0) part[parity] = make_float2(m, s);
  cluster.sync();  // release/acquire: the slots written above are visible cluster-wide
  float M = -INFINITY, S = 0.0f;
#pragma unroll
  for (int c = 0; c < kCs; ++c) {
    const float2 p = *cluster.map_shared_rank(&part[parity], c);
    combine(M, S, p.x, p.y);
  }
  return make_float2(M, S);
}

// Persistent: cluster c takes rows c, c + clusters, ...; block `rank` of it stages packs
// [rank * per, (rank + 1) * per) of each, copying its slice of the next row in behind the
// gradient's writes exactly as the staged kernel does (each thread touches only its own packs of
// the slice, so the buffer needs no barrier).
template <typename T, int kCs>
__global__ void __launch_bounds__(kThreadsPerSm / 2 / kCs, 2 * kCs)
    cross_entropy_cluster_kernel(T* logits, float* losses, const int32_t* targets, int N, int V,
                                 int Vp, float dscale) {
  constexpr int kN = Pack<T>::kN;
  extern __shared__ __align__(16) unsigned char staged[];
  __shared__ float2 part[2];
  Pack<T>* slice = reinterpret_cast<Pack<T>*>(staged);
  const int rank = int(cg::this_cluster().block_rank()), clusters = int(gridDim.x) / kCs;
  const int per = (Vp / kN + kCs - 1) / kCs, first = rank * per;
  const int mine = max(0, min(Vp / kN - first, per)), rounds = (mine + blockDim.x - 1) / blockDim.x;
  int n = int(blockIdx.x) / kCs;  // the launch has <= N clusters
  stage_row(slice, logits + size_t(n) * Vp + size_t(first) * kN, mine, rounds);
  for (int parity = 0; n < N; n += clusters, parity ^= 1) {
    T* x = logits + size_t(n) * Vp + size_t(first) * kN;  // this block's slice
    const int tgt = targets[n];
    // Read before this row's cluster barrier; the row's gradient is written only after it.
    const float target_logit =
        rank == 0 && threadIdx.x == 0 && tgt >= 0 ? to_f(logits[size_t(n) * Vp + tgt]) : 0.0f;
    float m = -INFINITY, s = 0.0f;
    for (int r = 0; r < rounds; ++r) {
      wait_async(rounds - 1 - r);  // round r has landed
      const int q = threadIdx.x + r * blockDim.x;
      if (q < mine) accumulate(m, s, slice[q], (first + q) * kN, V);
    }
    const float2 row = cluster_pair<kCs>(m, s, part, parity);
    if (rank == 0 && threadIdx.x == 0)
      losses[n] = tgt < 0 ? 0.0f : logf(row.y) + row.x - target_logit;
    const float Ml = row.x * kLog2e, scale = 1.0f / row.y * dscale;
    const T* next = n + clusters < N ? x + size_t(clusters) * Vp : nullptr;
    for (int r = 0; r < rounds; ++r) {
      const int q = threadIdx.x + r * blockDim.x;
      if (q < mine) {
        store_pack(x + q * kN, gradient(slice[q], (first + q) * kN, V, tgt, Ml, scale, dscale));
        if (next != nullptr) copy_async16(slice + q, next + q * kN);
      }
      commit_async();
    }
  }
  cg::this_cluster().sync();  // no block leaves while another may still read its `part`
}

template <typename T, int kCs>
cudaLaunchConfig_t cluster_config(int grid, size_t bytes, cudaStream_t stream,
                                  cudaLaunchAttribute& attr) {
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = kCs;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(kThreadsPerSm / 2 / kCs);
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Blocks in the persistent grid (as many clusters as the device holds at once), 0 where a slice
// does not fit; worked out (and the kernel's shared-memory limit raised) once per device and row
// size, in the first call: not inside a graph capture.
template <typename T, int kCs>
int cluster_grid(int Vp) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> known;
  int dev = 0;
  RY_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find({dev, Vp});
  if (it != known.end()) return it->second;
  const auto kernel = cross_entropy_cluster_kernel<T, kCs>;
  int optin = 0;
  RY_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  cudaFuncAttributes fa{};
  RY_CUDA(cudaFuncGetAttributes(&fa, kernel));
  const size_t fits = size_t(optin) - fa.sharedSizeBytes;
  const size_t bytes = size_t(slice_packs<T>(Vp, kCs)) * sizeof(Pack<T>);
  int clusters = 0;
  if (bytes <= fits) {
    RY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(fits)));
    cudaLaunchAttribute attr{};
    const cudaLaunchConfig_t cfg = cluster_config<T, kCs>(kCs, bytes, nullptr, attr);
    RY_CUDA(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
  }
  return known[{dev, Vp}] = clusters * kCs;
}

template <typename T, int kCs>
bool launch(T* logits, float* losses, const int32_t* targets, int N, int V, int Vp, float dscale,
            cudaStream_t stream) {
  const int most = cluster_grid<T, kCs>(Vp);
  if (most == 0) return false;
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t cfg =
      cluster_config<T, kCs>(std::min(N, most / kCs) * kCs,
                             size_t(slice_packs<T>(Vp, kCs)) * sizeof(Pack<T>), stream, attr);
  RY_CUDA(cudaLaunchKernelEx(&cfg, cross_entropy_cluster_kernel<T, kCs>, logits, losses, targets, N,
                             V, Vp, dscale));
  return true;
}

[[noreturn]] void unbuilt(int cluster) {
  throw std::invalid_argument("cross-entropy: clusters of " + std::to_string(cluster) +
                              " blocks are not built: use 2 or 4");
}

}  // namespace

template <typename T>
int cross_entropy_cluster_grid(int cluster, int Vp) {
  if (cluster == 2) return cluster_grid<T, 2>(Vp);
  if (cluster == 4) return cluster_grid<T, 4>(Vp);
  unbuilt(cluster);
}

template <typename T>
bool cross_entropy_cluster(int cluster, T* logits, float* losses, const int32_t* targets, int N,
                           int V, int Vp, float dscale, cudaStream_t stream) {
  if (cluster == 2) return launch<T, 2>(logits, losses, targets, N, V, Vp, dscale, stream);
  if (cluster == 4) return launch<T, 4>(logits, losses, targets, N, V, Vp, dscale, stream);
  unbuilt(cluster);
}

template int cross_entropy_cluster_grid<float>(int, int);
template int cross_entropy_cluster_grid<bf16>(int, int);
template bool cross_entropy_cluster<float>(int, float*, float*, const int32_t*, int, int, int,
                                           float, cudaStream_t);
template bool cross_entropy_cluster<bf16>(int, bf16*, float*, const int32_t*, int, int, int, float,
                                          cudaStream_t);

}  // namespace railyard::cuda
