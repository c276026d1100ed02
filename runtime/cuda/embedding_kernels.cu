#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "embedding_kernels.hpp"
#include "wte_segments.hpp"

namespace railyard::cuda {

namespace {

// One thread per 16 bytes of the output row (Pack<T>): the gather reads whole vectors.
template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe,
                                         int Tn, int C, size_t packs) {
  constexpr int kN = Pack<T>::kN;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < packs;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t e = i * kN, row = e / C;
    const int c = static_cast<int>(e % C);
    const int t = static_cast<int>(row % Tn);
    const Pack<T> a = load_pack(wte + size_t(tokens[row]) * C + c);
    const Pack<T> b = load_pack(wpe + size_t(t) * C + c);
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < kN; ++k) o.v[k] = from_f<T>(to_f(a.v[k]) + to_f(b.v[k]));
    store_pack(out + e, o);
  }
}

constexpr int kBlockWarps = 8;  // at most, per block of the wte backward: whole entries each
// Rows loaded before their sums, in order, are taken: of one token's run (at 4, the wte kernel
// needs 78 registers, three blocks per multiprocessor), of the batch for dwpe (its threads are
// one wave).
constexpr int kRunRowsInFlight = 4, kBatchRowsInFlight = 8;

// The end of the run of `tok` that starts at sorted entry i: the warp compares 32 keys at once.
__device__ int run_end(const uint32_t* keys, uint32_t tok, int i, int N) {
  const int lane = threadIdx.x % 32;
  int end = i + 1;
  for (;;) {
    const int k = end + lane;
    const unsigned same = __ballot_sync(0xffffffffu, k < N && keys[k] == tok);
    if (same != 0xffffffffu) return end + __ffs(~same) - 1;
    end += 32;
  }
}

// Each sorted entry has `warps` warps (one pack of 16 bytes per thread up to 8 warps' packs, C =
// 2048 in bf16; wider rows loop); the entry that starts a run of equal tokens adds the run's rows
// of dout (ascending positions: the sort is stable) and then adds that sum to the token's row. A
// pack's sum is taken row by row from zero, kRunRowsInFlight rows loaded at a time, and the token's
// row is read before the sum: the order, and so the bits, of the block-per-entry kernel this
// replaced, whose 16384 blocks of 128 threads mostly returned at once.
template <typename T>
__global__ void __launch_bounds__(kBlockWarps * 32, 3)
    embedding_wte_backward_kernel(float* dwte, const T* dout, const uint32_t* keys,
                                  const uint32_t* pos, int N, int C, int warps) {
  constexpr int kN = Pack<T>::kN;
  const int warp = threadIdx.x / 32, entries = blockDim.x / 32 / warps;
  const int i = blockIdx.x * entries + warp / warps;
  if (i >= N) return;  // whole warps
  const uint32_t tok = keys[i];
  if (i > 0 && keys[i - 1] == tok) return;  // the same for the whole warp
  const int end = run_end(keys, tok, i, N), packs = C / kN;
  for (int q = (warp % warps) * 32 + threadIdx.x % 32; q < packs; q += warps * 32) {
    float4* row = reinterpret_cast<float4*>(dwte + size_t(tok) * C + q * kN);
    float4 old[kN / 4];
#pragma unroll
    for (int h = 0; h < kN / 4; ++h) old[h] = row[h];
    float s[kN] = {};
    for (int j = i; j < end; j += kRunRowsInFlight) {
      Pack<T> v[kRunRowsInFlight];
#pragma unroll
      for (int u = 0; u < kRunRowsInFlight; ++u) {
        if (j + u < end) v[u] = load_pack(dout + size_t(pos[j + u]) * C + q * kN);
      }
#pragma unroll
      for (int u = 0; u < kRunRowsInFlight; ++u) {
        if (j + u >= end) break;
#pragma unroll
        for (int k = 0; k < kN; ++k) s[k] += to_f(v[u].v[k]);
      }
    }
#pragma unroll
    for (int h = 0; h < kN / 4; ++h) {
      row[h] = make_float4(old[h].x + s[4 * h], old[h].y + s[4 * h + 1], old[h].z + s[4 * h + 2],
                           old[h].w + s[4 * h + 3]);
    }
  }
}

// dwpe's pack i (one thread's 16 bytes of the row t): the sum over the batch, in batch order,
// needs no atomics; kRows rows are loaded before they are added.
template <int kRows, typename T>
__device__ void wpe_pack_sum(float* dwpe, const T* dout, int B, size_t tc, size_t i,
                             bool accumulate) {
  constexpr int kN = Pack<T>::kN;
  float s[kN] = {};
#pragma unroll 1
  for (int b = 0; b < B; b += kRows) {
    Pack<T> v[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      if (b + u < B) v[u] = load_pack(dout + size_t(b + u) * tc + i);
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      if (b + u >= B) break;
#pragma unroll
      for (int k = 0; k < kN; ++k) s[k] += to_f(v[u].v[k]);
    }
  }
  float4* out = reinterpret_cast<float4*>(dwpe + i);
#pragma unroll
  for (int h = 0; h < kN / 4; ++h) {
    float4 o = make_float4(s[4 * h], s[4 * h + 1], s[4 * h + 2], s[4 * h + 3]);
    if (accumulate) {
      const float4 a = out[h];
      o = make_float4(a.x + o.x, a.y + o.y, a.z + o.z, a.w + o.w);
    }
    out[h] = o;
  }
}

// One thread per (t, pack of columns).
template <typename T>
__global__ void embedding_wpe_backward_kernel(float* dwpe, const T* dout, int B, int Tn, int C,
                                              bool accumulate) {
  const size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * Pack<T>::kN;
  const size_t tc = size_t(Tn) * C;
  if (i < tc) wpe_pack_sum<kBatchRowsInFlight>(dwpe, dout, B, tc, i, accumulate);
}

inline __device__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// Where the segment's entry r sends the sum of its run's rows in the segment (wte_segments.hpp):
// none (not the first entry of its run in the segment), the wte row, or a partial row.
struct PieceTarget {
  bool starts, whole;
  float* out;  // the wte row or the partial row, at column 0
};

__device__ PieceTarget piece_target(float* dwte, float* partials, const uint32_t* keys, int N,
                                    int C, int g, int r, uint32_t tok) {
  const int first = g * kWteSegmentRows;
  const int last = min(first + kWteSegmentRows, N) - 1, i = first + r;
  const bool from_before = r == 0 && first > 0 && keys[first - 1] == tok;
  const bool into_after = keys[last] == tok && last + 1 < N && keys[last + 1] == tok;
  PieceTarget t;
  t.starts = r == 0 || keys[i - 1] != tok;
  t.whole = !from_before && !into_after;
  t.out = t.whole ? dwte + size_t(tok) * C : partials + size_t(2 * g + (from_before ? 0 : 1)) * C;
  return t;
}

// The piece of the run of `tok` that starts at the segment's entry r, at the thread's column c:
// its rows in shared memory (up to the segment's n entries, whose keys are `keys`) added in order
// from the first.
template <int kH>
__device__ void piece_sum(float4 (&s)[kH], const float4* rows, const uint32_t* keys, uint32_t tok,
                          int r, int n, int pe, int c) {
#pragma unroll
  for (int h = 0; h < kH; ++h) s[h] = rows[(r * kH + h) * pe + c];
#pragma unroll 1
  for (int j = r + 1; j < n && keys[j] == tok; ++j) {
#pragma unroll
    for (int h = 0; h < kH; ++h) s[h] = add4(s[h], rows[(j * kH + h) * pe + c]);
  }
}

// The segment g of the sorted batch (wte_segments.hpp): entry r's threads (pe of them, `passes`
// packs each) load its row of dout into shared memory, with the wte row where the entry starts a
// run wholly in the segment; then the first entry of each run in the segment adds the run's rows
// there in order and writes the piece (to wte, old + sum, or to its partial row).
template <typename T>
__device__ void wte_segment(float* dwte, float* partials, const T* dout, const uint32_t* keys,
                            const uint32_t* pos, int N, int C, int g, int pe, int passes) {
  constexpr int kN = Pack<T>::kN, kH = kN / 4;
  extern __shared__ float4 rows[];  // [entry][h][thread of the entry]
  const int first = g * kWteSegmentRows, n = min(kWteSegmentRows, N - first);
  const int r = threadIdx.x / pe, c = threadIdx.x % pe, packs = C / kN;
  const bool live = r < n;
  uint32_t tok = 0, p = 0;
  PieceTarget t{false, false, nullptr};
  if (live) {
    tok = keys[first + r];
    p = pos[first + r];
    t = piece_target(dwte, partials, keys, N, C, g, r, tok);
  }
#pragma unroll 1
  for (int pass = 0; pass < passes; ++pass) {
    const int q = pass * pe + c;
    const bool active = live && q < packs;
    float4 old[kH] = {};
    if (active && t.starts && t.whole) {
#pragma unroll
      for (int h = 0; h < kH; ++h) old[h] = reinterpret_cast<const float4*>(t.out + q * kN)[h];
    }
    if (active) {
      const Pack<T> v = load_pack(dout + size_t(p) * C + q * kN);
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        rows[(r * kH + h) * pe + c] = make_float4(to_f(v.v[4 * h]), to_f(v.v[4 * h + 1]),
                                                  to_f(v.v[4 * h + 2]), to_f(v.v[4 * h + 3]));
      }
    }
    __syncthreads();
    if (active && t.starts) {
      float4 s[kH];
      piece_sum(s, rows, keys + first, tok, r, n, pe, c);
      float4* out = reinterpret_cast<float4*>(t.out + q * kN);
#pragma unroll
      for (int h = 0; h < kH; ++h) out[h] = t.whole ? add4(old[h], s[h]) : s[h];
    }
    __syncthreads();  // the rows are the next pass's
  }
}

// One launch for both gradients: blocks [0, wpe_blocks) the wpe backward (2 batch rows in
// flight: two blocks of 768 threads a multiprocessor leave 40 registers), the rest one segment
// of the wte backward each.
template <typename T>
__global__ void __launch_bounds__(kWteSegmentThreads, 2)
    embedding_segments_kernel(float* dwte, float* partials, float* dwpe, const T* dout,
                              const uint32_t* keys, const uint32_t* pos, int B, int Tn, int C,
                              int pe, int passes, int wpe_blocks, bool accumulate_wpe) {
  if (int(blockIdx.x) < wpe_blocks) {
    const size_t i = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * Pack<T>::kN;
    const size_t tc = size_t(Tn) * C;
    if (i < tc) wpe_pack_sum<2>(dwpe, dout, B, tc, i, accumulate_wpe);
    return;
  }
  wte_segment(dwte, partials, dout, keys, pos, B * Tn, C, blockIdx.x - wpe_blocks, pe, passes);
}

// Segments after g whose first entry is still `tok`: a warp's ballot over 32 segments at a time.
__device__ int segments_continued(const uint32_t* keys, uint32_t tok, int g, int N) {
  const int lane = threadIdx.x % 32;
  for (int m = 0;; m += 32) {
    const int at = (g + 1 + m + lane) * kWteSegmentRows;
    const unsigned same = __ballot_sync(0xffffffffu, at < N && keys[at] == tok);
    if (same != 0xffffffffu) return m + __ffs(~same) - 1;
  }
}

// Partials [b, e) of the list (segment g's tail row, then the next segments' head rows) at float4
// column col, added in order from the first.
__device__ float4 partials_sum(const float4* partials, int g, int C4, int col, int b, int e) {
  constexpr int kInFlight = 4;  // two combine blocks a multiprocessor: 40 registers
  auto row = [&](int k) { return partials[size_t(k == 0 ? 2 * g + 1 : 2 * (g + k)) * C4 + col]; };
  float4 s = row(b);
  for (int k = b + 1; k < e; k += kInFlight) {
    float4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      if (k + u < e) v[u] = row(k + u);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      if (k + u < e) s = add4(s, v[u]);
    }
  }
  return s;
}

// The sums of the kCombineGroups parts of `count` partials (parts[j * cw]), the empty ones left
// out, added in order from the first.
__device__ float4 parts_in_order(const float4* parts, int cw, int count) {
  int j = 0;
  while (combine_part_begin(j, count) == combine_part_begin(j + 1, count)) ++j;  // count >= 2
  float4 s = parts[j * cw];
  for (++j; j < kCombineGroups; ++j) {
    if (combine_part_begin(j, count) < combine_part_begin(j + 1, count)) {
      s = add4(s, parts[j * cw]);
    }
  }
  return s;
}

// The run that starts in segment g and continues past it, if one does (the same for the whole
// block): its partials in kCombineGroups parts side by side (cw float4 columns a group, `passes`
// times), then the parts in order, then the sum added to the wte row.
__device__ void combine_segment(float4* parts, float* dwte, const float* partials,
                                const uint32_t* keys, int N, int C, int g, int cw, int passes) {
  const int first = g * kWteSegmentRows, last = min(first + kWteSegmentRows, N) - 1;
  if (last + 1 >= N) return;
  const uint32_t tok = keys[last];
  if (keys[last + 1] != tok || (first > 0 && keys[first - 1] == tok)) return;
  const int count = 1 + segments_continued(keys, tok, g, N), C4 = C / 4;
  const int grp = threadIdx.x / cw, c = threadIdx.x % cw;
  const bool in = grp < kCombineGroups;  // the block is whole warps (the ballot)
  const int b = in ? combine_part_begin(grp, count) : 0;
  const int e = in ? combine_part_begin(grp + 1, count) : 0;
  const float4* p4 = reinterpret_cast<const float4*>(partials);
  float4* row = reinterpret_cast<float4*>(dwte + size_t(tok) * C);
  for (int pass = 0; pass < passes; ++pass) {
    const int col = pass * cw + c;
    const float4 old = grp == 0 && col < C4 ? row[col] : make_float4(0.f, 0.f, 0.f, 0.f);
    if (col < C4 && b < e) parts[grp * cw + c] = partials_sum(p4, g, C4, col, b, e);
    __syncthreads();
    if (grp == 0 && col < C4) row[col] = add4(old, parts_in_order(parts + c, cw, count));
    __syncthreads();  // parts are the next pass's
  }
}

// Block k combines segments [k, k + 1) x kCombineSegments, one after another: most have nothing
// to add, so a block each would be mostly empty blocks.
__global__ void __launch_bounds__(kCombineGroups* kCombineColumns, 2)
    embedding_combine_kernel(float* dwte, const float* partials, const uint32_t* keys, int N, int C,
                             int cw, int passes) {
  __shared__ float4 parts[kCombineGroups * kCombineColumns];
  const int g0 = blockIdx.x * kCombineSegments, segments = wte_segments(N);
  for (int g = g0; g < min(g0 + kCombineSegments, segments); ++g) {
    combine_segment(parts, dwte, partials, keys, N, C, g, cw, passes);
  }
}

int blocks_for(size_t n, int threads) {
  size_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65536 ? b : 65536);
}

// Warps per sorted entry: one pack per thread where the row fits a block, whole entries per
// block.
template <typename T>
void launch_wte_backward(float* dwte, const T* dout, const uint32_t* keys, const uint32_t* pos,
                         int N, int C, cudaStream_t stream) {
  const int warps = std::min((C / Pack<T>::kN + 31) / 32, kBlockWarps);
  const int entries = kBlockWarps / warps, blocks = (N + entries - 1) / entries;
  embedding_wte_backward_kernel<<<blocks, entries * warps * 32, 0, stream>>>(dwte, dout, keys, pos,
                                                                             N, C, warps);
  RY_CUDA_LAUNCHED();
}

// The segmented wte backward and the wpe backward in one launch, then the combine of the runs
// longer than a segment (wte_segments.hpp).
template <typename T>
void launch_segments(float* dwte, float* dwpe, float* partials, const T* dout, const uint32_t* keys,
                     const uint32_t* pos, int B, int Tn, int C, bool accumulate_wpe,
                     cudaStream_t stream) {
  constexpr int kN = Pack<T>::kN;
  const int N = B * Tn, segments = wte_segments(N);
  const SplitShape e = split_items(C / kN, kWteSegmentThreads / kWteSegmentRows);
  const int threads = kWteSegmentRows * e.threads;
  const size_t wpe_threads = size_t(Tn) * C / kN;
  const int wpe_blocks = static_cast<int>((wpe_threads + threads - 1) / threads);
  const size_t shared = size_t(threads) * kN * sizeof(float);
  embedding_segments_kernel<<<wpe_blocks + segments, threads, shared, stream>>>(
      dwte, partials, dwpe, dout, keys, pos, B, Tn, C, e.threads, e.passes, wpe_blocks,
      accumulate_wpe);
  RY_CUDA_LAUNCHED();
  const SplitShape cs = split_items(C / 4, kCombineColumns);
  const int combine_threads = (kCombineGroups * cs.threads + 31) / 32 * 32;
  const int combine_blocks = (segments + kCombineSegments - 1) / kCombineSegments;
  embedding_combine_kernel<<<combine_blocks, combine_threads, 0, stream>>>(
      dwte, partials, keys, N, C, cs.threads, cs.passes);
  RY_CUDA_LAUNCHED();
}

// The kernels move 16-byte vectors (Pack<T>): a row must hold whole ones.
template <typename T>
void require_whole_packs(const char* caller, int C) {
  if (C % Pack<T>::kN != 0) {
    throw std::invalid_argument(std::string(caller) + ": dim " + std::to_string(C) +
                                " is not a multiple of " + std::to_string(Pack<T>::kN) +
                                " (the kernels move 16-byte vectors): use a --dim that is a "
                                "multiple of 8");
  }
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C, cudaStream_t stream) {
  constexpr int kN = Pack<T>::kN;
  require_whole_packs<T>("embedding_forward", C);
  const size_t packs = size_t(B) * Tn * C / kN;
  embedding_forward_kernel<<<blocks_for(packs, 256), 256, 0, stream>>>(out, tokens, wte, wpe, Tn, C,
                                                                       packs);
  RY_CUDA_LAUNCHED();
}

size_t embedding_backward_scratch_bytes(int B, int Tn, int C) {
  return wte_partials_floats(B * Tn, C) * sizeof(float);
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, const T* dout, const uint32_t* sorted_tokens,
                        const uint32_t* sorted_positions, float* scratch, int B, int Tn, int C,
                        bool accumulate_wpe, cudaStream_t stream, WteBackward how) {
  require_whole_packs<T>("embedding_backward", C);
  if (how == WteBackward::kSegments) {
    launch_segments(dwte, dwpe, scratch, dout, sorted_tokens, sorted_positions, B, Tn, C,
                    accumulate_wpe, stream);
    return;
  }
  launch_wte_backward(dwte, dout, sorted_tokens, sorted_positions, B * Tn, C, stream);
  const size_t pack_threads = size_t(Tn) * C / Pack<T>::kN;
  embedding_wpe_backward_kernel<<<static_cast<int>((pack_threads + 255) / 256), 256, 0, stream>>>(
      dwpe, dout, B, Tn, C, accumulate_wpe);
  RY_CUDA_LAUNCHED();
}

#define RY_INSTANTIATE(T)                                                                         \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int,       \
                                     cudaStream_t);                                               \
  template void embedding_backward<T>(float*, float*, const T*, const uint32_t*, const uint32_t*, \
                                      float*, int, int, int, bool, cudaStream_t, WteBackward);
RY_INSTANTIATE(float)
RY_INSTANTIATE(bf16)
#undef RY_INSTANTIATE

}  // namespace railyard::cuda
