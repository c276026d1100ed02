#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "grad_norm_kernels.hpp"

namespace railyard::cuda {

namespace {

constexpr int kBlocks = 1056, kThreads = 512;  // 8 blocks of 512 per H200 multiprocessor
// grad_sumsq_ranges: a tile is 2 packs per thread (16 KB: a range's tail tile wastes little, the
// blocks' last tiles leave little of a wave idle); a block adds kDoneChunk given slots.
constexpr int kTileLoads = 2;
constexpr size_t kTile4 = size_t(kThreads) * kTileLoads;
constexpr size_t kDoneChunk = size_t(kThreads) * 4;

// The sum over the block of each thread's s, in a fixed order (a tree over the threads); for
// thread 0. `part` holds blockDim.x doubles, a power of two.
__device__ double block_tree_sum(double s, double* part) {
  part[threadIdx.x] = s;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  return part[0];
}

// Pass one: each block's sum of squares, over a fixed partition: 16-byte loads over the aligned
// body (a grid-stride loop), the at most 3 elements before it and 3 after it by block 0, then a
// fixed block tree.
__global__ void grad_sumsq_kernel(double* partials, const float* g, size_t head, size_t n4,
                                  size_t n) {
  __shared__ float scratch[32];
  float s = 0.0f;
  const float4* body = reinterpret_cast<const float4*>(g + head);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4;
       i += size_t(gridDim.x) * blockDim.x) {
    const float4 v = body[i];
    s += v.x * v.x;
    s += v.y * v.y;
    s += v.z * v.z;
    s += v.w * v.w;
  }
  if (blockIdx.x == 0) {
    const size_t after = head + 4 * n4;
    if (threadIdx.x < head) s += g[threadIdx.x] * g[threadIdx.x];
    if (threadIdx.x < n - after) s += g[after + threadIdx.x] * g[after + threadIdx.x];
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = double(s);
}

// The partials added in a fixed order by one block of kThreads (strided per thread, then a
// tree); for thread 0. Loads bypass L1: in a fused launch other blocks wrote them.
__device__ double fixed_order_total(const double* partials, size_t count, double* part) {
  double s = 0.0;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) s += __ldcg(partials + i);
  return block_tree_sum(s, part);
}

// Pass two, one block: the partials added in a fixed order.
__global__ void sum_partials_kernel(double* out, const double* partials, size_t count) {
  __shared__ double part[kThreads];
  const double s = fixed_order_total(partials, count, part);
  if (threadIdx.x == 0) *out = s;
}

// min(1, clip / (sqrt(sumsq) + 1e-6)) in double, as railyard::clip_factor; 1 when clip <= 0.
__device__ float clip_factor_of(double sumsq, float clip) {
  double k = clip > 0.0f ? double(clip) / (sqrt(sumsq) + 1e-6) : 1.0;
  return k < 1.0 ? float(k) : 1.0f;
}

// Whether this block is the grid's last to finish, after thread 0 wrote its partial (made
// visible to the other blocks first). The last block puts the ticket back to zero.
__device__ bool last_block(unsigned* ticket) {
  __shared__ bool last;
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    if (last) *ticket = 0;
  }
  __syncthreads();
  if (last) __threadfence();
  return last;
}

// One tile's sum of squares for this thread: its kTileLoads packs of [begin, end), all loads
// issued before the first add.
__device__ float tile_sumsq(const float4* g, size_t begin, size_t end) {
  float4 v[kTileLoads];
#pragma unroll
  for (int k = 0; k < kTileLoads; ++k) {
    const size_t i = begin + size_t(k) * blockDim.x + threadIdx.x;
    v[k] = i < end ? g[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < kTileLoads; ++k) {
    s += v[k].x * v[k].x;
    s += v[k].y * v[k].y;
    s += v[k].z * v[k].z;
    s += v[k].w * v[k].w;
  }
  return s;
}

// What the last block of a fused launch writes (grad_sumsq_ranges_clip); ticket null: nothing.
struct NormTotal {
  unsigned* ticket = nullptr;
  double* sumsq = nullptr;
  float* scale = nullptr;
  float clip = 0.0f;
};

// This block's sum of squares; for thread 0. Blocks below `tile_blocks`: tiles blockIdx.x,
// + tile_blocks, ... of the ranges (the range of a tile found by walking the table forward: a
// block's tiles only increase). The others: a chunk of kDoneChunk of the given slots each, in
// double.
__device__ double ranges_block_sumsq(const float4* g, const SumsqRange* ranges, size_t tiles,
                                     unsigned tile_blocks, const double* done, size_t n_done,
                                     double* part) {
  __shared__ float scratch[32];
  if (blockIdx.x >= tile_blocks) {
    const size_t chunk = (blockIdx.x - tile_blocks) * kDoneChunk;
    double s = 0.0;
    for (size_t i = chunk + threadIdx.x; i < chunk + kDoneChunk && i < n_done; i += blockDim.x)
      s += done[i];
    return block_tree_sum(s, part);
  }
  float s = 0.0f;
  size_t r = 0;
  for (size_t t = blockIdx.x; t < tiles; t += tile_blocks) {
    while (ranges[r + 1].first_tile <= t) ++r;
    const SumsqRange range = ranges[r];
    s += tile_sumsq(g, range.begin4 + (t - range.first_tile) * kTile4, range.end4);
  }
  return double(block_sum(s, scratch));
}

// Each block's sum into partials[blockIdx.x]; with a total, the last block to finish then adds
// them as sum_partials_kernel does (the same code: the same bits) and takes the clip factor.
__global__ void grad_sumsq_ranges_kernel(double* partials, const float4* g,
                                         const SumsqRange* ranges, size_t tiles,
                                         unsigned tile_blocks, const double* done, size_t n_done,
                                         NormTotal total) {
  __shared__ double part[kThreads];
  const double s = ranges_block_sumsq(g, ranges, tiles, tile_blocks, done, n_done, part);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
  if (total.ticket == nullptr || !last_block(total.ticket)) return;
  const double sumsq = fixed_order_total(partials, gridDim.x, part);
  if (threadIdx.x == 0) {
    *total.sumsq = sumsq;
    *total.scale = clip_factor_of(sumsq, total.clip);
  }
}

__global__ void clip_factor_kernel(float* scale, const double* sumsq, float clip) {
  *scale = clip_factor_of(*sumsq, clip);
}

}  // namespace

size_t grad_sumsq_slots(size_t n, size_t max_blocks) {
  if (n == 0) return 0;
  const size_t b = (n + 4 * kThreads - 1) / (4 * kThreads);  // a float4 per thread at least
  return b < max_blocks ? b : max_blocks;
}

size_t grad_sumsq_full_blocks() {
  return kBlocks;
}

std::vector<SumsqRange> sumsq_range_table(const std::vector<std::pair<size_t, size_t>>& parts) {
  std::vector<SumsqRange> table;
  uint64_t tiles = 0;
  for (const auto& [begin, end] : parts) {
    if (begin % 4 != 0 || end % 4 != 0 || end < begin) {
      throw std::invalid_argument("sumsq_range_table: range [" + std::to_string(begin) + ", " +
                                  std::to_string(end) +
                                  ") does not start and end on 16-byte packs of fp32");
    }
    if (end == begin) continue;
    table.push_back({begin / 4, end / 4, tiles});
    tiles += (end / 4 - begin / 4 + kTile4 - 1) / kTile4;
  }
  table.push_back({0, 0, tiles});
  return table;
}

size_t grad_sumsq_ranges_slots(size_t tiles, size_t done) {
  return std::min(tiles, size_t(kBlocks)) + (done + kDoneChunk - 1) / kDoneChunk;
}

namespace {

void launch_ranges(double* slots, const float* g, const SumsqRange* ranges, size_t tiles,
                   const double* done_slots, size_t done, const NormTotal& total,
                   cudaStream_t stream) {
  const size_t blocks = grad_sumsq_ranges_slots(tiles, done);
  const unsigned tile_blocks = unsigned(std::min(tiles, size_t(kBlocks)));
  grad_sumsq_ranges_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(
      slots, reinterpret_cast<const float4*>(g), ranges, tiles, tile_blocks, done_slots, done,
      total);
  RY_CUDA_LAUNCHED();
}

}  // namespace

void grad_sumsq_ranges(double* slots, const float* g, const SumsqRange* ranges, size_t tiles,
                       const double* done_slots, size_t done, cudaStream_t stream) {
  if (grad_sumsq_ranges_slots(tiles, done) == 0) return;
  launch_ranges(slots, g, ranges, tiles, done_slots, done, NormTotal{}, stream);
}

void grad_sumsq_ranges_clip(double* sumsq, float* scale, float clip, unsigned* ticket,
                            double* slots, const float* g, const SumsqRange* ranges, size_t tiles,
                            const double* done_slots, size_t done, cudaStream_t stream) {
  if (grad_sumsq_ranges_slots(tiles, done) == 0) {
    throw std::invalid_argument("grad_sumsq_ranges_clip: no ranges and no slots to sum");
  }
  launch_ranges(slots, g, ranges, tiles, done_slots, done, NormTotal{ticket, sumsq, scale, clip},
                stream);
}

void clip_factor_on_device(float* scale, const double* sumsq, float clip, cudaStream_t stream) {
  clip_factor_kernel<<<1, 1, 0, stream>>>(scale, sumsq, clip);
  RY_CUDA_LAUNCHED();
}

void grad_sumsq_slice(double* slots, const float* g, size_t n, size_t max_blocks,
                      cudaStream_t stream) {
  const size_t blocks = grad_sumsq_slots(n, max_blocks);
  if (blocks == 0) return;
  // Elements before the first 16-byte boundary (none for the engine's buckets, which start on
  // ParamLayout::kAlign elements).
  const size_t misaligned = (reinterpret_cast<uintptr_t>(g) % 16) / sizeof(float);
  const size_t head = std::min(n, (4 - misaligned) % 4);
  grad_sumsq_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(slots, g, head, (n - head) / 4, n);
  RY_CUDA_LAUNCHED();
}

void sum_slots(double* out, const double* slots, size_t count, cudaStream_t stream) {
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(out, slots, count);
  RY_CUDA_LAUNCHED();
}

}  // namespace railyard::cuda
