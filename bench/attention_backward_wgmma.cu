// The wgmma attention backward of attention_backward_wgmma.hpp. Every product is a 64x64x64
// wgmma (SM90_64x64x16 atoms, four k-steps) by one warpgroup: S and dP with both operands in
// shared memory (K-major, 128-byte swizzle), dV, dK and dQ with the probabilities or score
// gradients as the register operand A (an accumulator converted to bf16 in place: the fp32
// accumulator's register order is the A operand's, checked on the host against CuTe's layouts)
// and B the same shared tile read transposed (an MN-major view of the K-major bytes). Loads are
// cp.async into a second buffer while the current one is used; no producer warp (a prototype).
#include <cuda_runtime.h>

#include <cute/arch/mma_sm90_gmma.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>
#include <stdexcept>
#include <string>

#include "attention_backward_wgmma.hpp"
#include "cuda_check.hpp"

namespace railyard::bench {
namespace {

using namespace cute;
using Bf = cutlass::bfloat16_t;

constexpr int kHd = 64;                     // head dim: one 128-byte swizzle row
constexpr int kTileElems = 64 * kHd;        // a 64-row tile
constexpr int kTileBytes = kTileElems * 2;  // 8 KiB, a multiple of the 1 KiB swizzle atom
constexpr float kScale = 0.125f;            // 1 / sqrt(64)
constexpr float kLog2e = 1.4426950408889634f;

using TileShape = Shape<_64, _64>;
// (rows, 64 features), features contiguous, 128-byte swizzle: the layout load_tile writes.
using SmemK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Bf>{}, TileShape{}));
// The same bytes as (64 features, rows): the transposed operand of dV, dK and dQ.
using SmemMN = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Bf>{}, TileShape{}));
using MmaSS =
    decltype(make_tiled_mma(SM90_64x64x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::K>{}));
using MmaRS =
    decltype(make_tiled_mma(SM90_64x64x16_F32BF16BF16_RS<GMMA::Major::K, GMMA::Major::MN>{}));
using AccShape = decltype(partition_shape_C(MmaSS{}, TileShape{}));
using AFragShape = decltype(partition_shape_A(MmaRS{}, TileShape{}));

struct Args {
  const Bf* qkv;
  const Bf* dout;
  const float* lse;
  const float* d;
  Bf* dqkv;
  int T, H;
};

// --- shared-memory loads ------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n");
}
// All of this thread's copies landed and are visible to wgmma's (async-proxy) reads once the
// CTA has passed the barrier that follows.
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// 64 rows of 64 features (`src` row 0, rows `stride` elements apart) into a SmemK tile: 16-byte
// chunk c of row r lands at chunk c ^ (r % 8) (the 128-byte swizzle; the tile is 1 KiB aligned).
__device__ void load_tile(Bf* dst, const Bf* src, size_t stride) {
  for (int c = threadIdx.x; c < 64 * 8; c += blockDim.x) {
    const int r = c >> 3, ch = c & 7;
    cp_async16(reinterpret_cast<char*>(dst) + r * 128 + ((ch ^ (r & 7)) << 4),
               src + r * stride + ch * 8);
  }
}
// `n` floats (a multiple of 4) by the first n / 4 threads.
__device__ void load_floats(float* dst, const float* src, int n) {
  if (int(threadIdx.x) < n / 4) cp_async16(dst + 4 * threadIdx.x, src + 4 * threadIdx.x);
}

// --- warpgroup products ---------------------------------------------------------------------

__device__ __forceinline__ int wg_thread() {
  return int(threadIdx.x) % 128;
}

// acc += A B^T over 64 features; A and B are 64-row SmemK tiles. Call between
// warpgroup_arrive() and warpgroup_commit_batch().
template <class Acc>
__device__ __forceinline__ void mma_ss(const Bf* a, const Bf* b, Acc& acc) {
  MmaSS mma;
  auto thr = mma.get_thread_slice(wg_thread());
  Tensor ta = thr.make_fragment_A(thr.partition_A(make_tensor(make_smem_ptr(a), SmemK{})));
  Tensor tb = thr.make_fragment_B(thr.partition_B(make_tensor(make_smem_ptr(b), SmemK{})));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(ta); ++k) gemm(mma, ta(_, _, k), tb(_, _, k), acc);
}

// acc += A B over 64 rows: A (64 x 64 rows) in registers, B the SmemK tile `b` (rows x
// features) read as (features, rows).
template <class AFrag, class Acc>
__device__ __forceinline__ void mma_rs(AFrag& a, const Bf* b, Acc& acc) {
  MmaRS mma;
  auto thr = mma.get_thread_slice(wg_thread());
  Tensor tb = thr.make_fragment_B(thr.partition_B(make_tensor(make_smem_ptr(b), SmemMN{})));
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) gemm(mma, a(_, _, k), tb(_, _, k), acc);
}

// The accumulator as the next product's A operand: register i of the fp32 accumulator holds
// the (row, column) that register i of the A fragment wants (both compact over CuTe's GMMA
// layouts; attention_backward_layout_mismatches compares every thread's coordinates).
template <class Acc>
__device__ __forceinline__ auto to_a_operand(const Acc& acc) {
  Tensor a = make_tensor<Bf>(AFragShape{});
  static_assert(decltype(size(a))::value == decltype(size(acc))::value);
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) a(i) = Bf(acc(i));
  return a;
}

// S = A B^T and dP = C D^T (both SS) into fresh accumulators, waited for.
template <class Acc>
__device__ __forceinline__ void scores(const Bf* a, const Bf* b, const Bf* c, const Bf* d, Acc& s,
                                       Acc& dp) {
  clear(s);
  clear(dp);
  warpgroup_fence_operand(s);
  warpgroup_fence_operand(dp);
  warpgroup_arrive();
  mma_ss(a, b, s);
  mma_ss(c, d, dp);
  warpgroup_commit_batch();
  warpgroup_wait<0>();
  warpgroup_fence_operand(s);
  warpgroup_fence_operand(dp);
}

// P and dS in place of S and dP: p = exp(s / 8 - lse[query]) where key <= query (else 0),
// ds = p (dp - D[query]) (the score gradient before the 1/8 the stores apply). The accumulator's
// rows are keys and its columns queries where kRowsAreKeys (S^T, the dK/dV kernel), else the
// reverse; row0 and col0 are the first row's and column's positions, lse and dd the statistics
// of the tile's queries (by local index).
template <bool kRowsAreKeys, class Acc>
__device__ __forceinline__ void probabilities(Acc& s, Acc& dp, int row0, int col0, const float* lse,
                                              const float* dd) {
  Tensor c = MmaSS{}.get_thread_slice(wg_thread()).partition_C(make_identity_tensor(TileShape{}));
  CUTE_UNROLL
  for (int i = 0; i < size(s); ++i) {
    const int m = get<0>(c(i)), n = get<1>(c(i));
    const int local = kRowsAreKeys ? n : m;
    const int query = kRowsAreKeys ? col0 + n : row0 + m;
    const int key = kRowsAreKeys ? row0 + m : col0 + n;
    const float p = key <= query ? exp2f(fmaf(s(i), kScale * kLog2e, -lse[local] * kLog2e)) : 0.0f;
    s(i) = p;
    dp(i) = p * (dp(i) - dd[local]);
  }
}

// A 64 x 64 accumulator times `scale` as bf16 into rows `stride` elements apart.
template <class Acc>
__device__ void store_rows(Bf* dst, size_t stride, const Acc& acc, float scale) {
  Tensor c = MmaSS{}.get_thread_slice(wg_thread()).partition_C(make_identity_tensor(TileShape{}));
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) {
    dst[get<0>(c(i)) * stride + get<1>(c(i))] = Bf(acc(i) * scale);
  }
}

// The 1 KiB-aligned dynamic shared memory (the swizzle's pattern repeats every 1 KiB).
__device__ __forceinline__ char* aligned_smem() {
  extern __shared__ __align__(128) char raw[];
  return raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);
}
// A CTA of kWg warpgroups (1 or 2): 2 kWg + 4 tiles and 2 x 128 floats, plus the alignment's
// slack.
template <int kWg>
constexpr int kSmemBytes = (2 * kWg + 4) * kTileBytes + 2 * 128 * 4 + 1024;

// --- dK and dV ------------------------------------------------------------------------------

// One query block for this warpgroup's 64 keys: S^T = K Q^T, dP^T = V dO^T, dV += P^T dO,
// dK += dS^T Q.
template <class Acc>
__device__ void dkdv_step(const Bf* k, const Bf* v, const Bf* q, const Bf* dout, const float* lse,
                          const float* dd, int key0, int query0, Acc& dk, Acc& dv) {
  Tensor s = make_tensor<float>(AccShape{});
  Tensor dp = make_tensor<float>(AccShape{});
  scores(k, q, v, dout, s, dp);
  probabilities<true>(s, dp, key0, query0, lse, dd);
  Tensor p = to_a_operand(s);
  Tensor ds = to_a_operand(dp);
  warpgroup_fence_operand(p);
  warpgroup_fence_operand(ds);
  warpgroup_fence_operand(dv);
  warpgroup_fence_operand(dk);
  warpgroup_arrive();
  mma_rs(p, dout, dv);
  mma_rs(ds, q, dk);
  warpgroup_commit_batch();
  warpgroup_wait<0>();
  warpgroup_fence_operand(dv);
  warpgroup_fence_operand(dk);
}

// CTA per (64 kWg keys j, h, b), a warpgroup per 64 keys: K_j and V_j stay in shared memory
// while the query blocks from the diagonal on stream through two buffers; dK and dV are summed
// in registers in query order. Two warpgroups share each query block's loads but wait for each
// other every block; one runs 2 CTAs per SM that do not (190 registers a thread either way).
template <int kWg>
__global__ void __launch_bounds__(128 * kWg, 2 / kWg) dkdv_kernel(Args a) {
  constexpr int kKeys = 64 * kWg;
  char* sm = aligned_smem();
  Bf* sk = reinterpret_cast<Bf*>(sm);
  Bf* sv = sk + kWg * kTileElems;
  Bf* sq = sv + kWg * kTileElems;
  Bf* sdo = sq + 2 * kTileElems;
  float* slse = reinterpret_cast<float*>(sdo + 2 * kTileElems);  // [2 buffers][64]
  float* sd = slse + 128;
  const int j = blockIdx.x, h = blockIdx.y, b = blockIdx.z, wg = threadIdx.x / 128;
  const size_t qkv_stride = 3 * size_t(a.H) * kHd, do_stride = size_t(a.H) * kHd;
  const Bf* q = a.qkv + size_t(b) * a.T * qkv_stride + h * kHd;  // row 0 of the head's Q
  const Bf* k = q + a.H * kHd;
  const Bf* v = k + a.H * kHd;
  const Bf* dout = a.dout + size_t(b) * a.T * do_stride + h * kHd;
  const size_t stat0 = (size_t(b) * a.H + h) * a.T;
  for (int t = 0; t < kWg; ++t) {
    load_tile(sk + t * kTileElems, k + size_t(j * kKeys + t * 64) * qkv_stride, qkv_stride);
    load_tile(sv + t * kTileElems, v + size_t(j * kKeys + t * 64) * qkv_stride, qkv_stride);
  }
  auto load_queries = [&](int i, int buf) {
    load_tile(sq + buf * kTileElems, q + size_t(i) * 64 * qkv_stride, qkv_stride);
    load_tile(sdo + buf * kTileElems, dout + size_t(i) * 64 * do_stride, do_stride);
    load_floats(slse + buf * 64, a.lse + stat0 + i * 64, 64);
    load_floats(sd + buf * 64, a.d + stat0 + i * 64, 64);
  };
  const int first = kWg * j, n = a.T / 64, key0 = j * kKeys + wg * 64;
  load_queries(first, 0);
  cp_async_commit();
  Tensor dk = make_tensor<float>(AccShape{});
  Tensor dv = make_tensor<float>(AccShape{});
  clear(dk);
  clear(dv);
  for (int i = first; i < n; ++i) {
    const int buf = (i - first) & 1;
    cp_async_wait_all();
    __syncthreads();  // this buffer landed; the other one's readers are done
    if (i + 1 < n) load_queries(i + 1, buf ^ 1);
    cp_async_commit();
    // Skip a block whose queries all precede this warpgroup's keys (all masked).
    if (i * 64 + 63 >= key0) {
      dkdv_step(sk + wg * kTileElems, sv + wg * kTileElems, sq + buf * kTileElems,
                sdo + buf * kTileElems, slse + buf * 64, sd + buf * 64, key0, i * 64, dk, dv);
    }
  }
  Bf* dk_out = a.dqkv + (size_t(b) * a.T + key0) * qkv_stride + (a.H + h) * kHd;
  store_rows(dk_out, qkv_stride, dk, kScale);
  store_rows(dk_out + a.H * kHd, qkv_stride, dv, 1.0f);
}

// --- dQ -------------------------------------------------------------------------------------

// One key block for this warpgroup's 64 queries: S = Q K^T, dP = dO V^T, dQ += dS K.
template <class Acc>
__device__ void dq_step(const Bf* q, const Bf* dout, const Bf* k, const Bf* v, const float* lse,
                        const float* dd, int query0, int key0, Acc& dq) {
  Tensor s = make_tensor<float>(AccShape{});
  Tensor dp = make_tensor<float>(AccShape{});
  scores(q, k, dout, v, s, dp);
  probabilities<false>(s, dp, query0, key0, lse, dd);
  Tensor ds = to_a_operand(dp);
  warpgroup_fence_operand(ds);
  warpgroup_fence_operand(dq);
  warpgroup_arrive();
  mma_rs(ds, k, dq);
  warpgroup_commit_batch();
  warpgroup_wait<0>();
  warpgroup_fence_operand(dq);
}

// CTA per (64 kWg queries i, h, b), a warpgroup per 64 queries, the longest (last) blocks
// first: Q_i, dO_i and their statistics stay in shared memory while the key blocks up to the
// diagonal stream through two buffers; dQ is summed in registers in key order. 4 / kWg CTAs per
// SM (at most 128 registers): one's loads and softmax overlap another's products.
template <int kWg>
__global__ void __launch_bounds__(128 * kWg, 4 / kWg) dq_kernel(Args a) {
  constexpr int kRows = 64 * kWg;
  char* sm = aligned_smem();
  Bf* sq = reinterpret_cast<Bf*>(sm);
  Bf* sdo = sq + kWg * kTileElems;
  Bf* sk = sdo + kWg * kTileElems;
  Bf* sv = sk + 2 * kTileElems;
  float* slse = reinterpret_cast<float*>(sv + 2 * kTileElems);  // [kRows]
  float* sd = slse + 128;
  const int i = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int wg = threadIdx.x / 128;
  const size_t qkv_stride = 3 * size_t(a.H) * kHd, do_stride = size_t(a.H) * kHd;
  const Bf* q = a.qkv + (size_t(b) * a.T + i * kRows) * qkv_stride + h * kHd;  // block's row 0
  const Bf* k = a.qkv + size_t(b) * a.T * qkv_stride + (a.H + h) * kHd;        // the head's key 0
  const Bf* v = k + a.H * kHd;
  const Bf* dout = a.dout + (size_t(b) * a.T + i * kRows) * do_stride + h * kHd;
  const size_t stat0 = (size_t(b) * a.H + h) * a.T + i * kRows;
  for (int t = 0; t < kWg; ++t) {
    load_tile(sq + t * kTileElems, q + size_t(t) * 64 * qkv_stride, qkv_stride);
    load_tile(sdo + t * kTileElems, dout + size_t(t) * 64 * do_stride, do_stride);
  }
  load_floats(slse, a.lse + stat0, kRows);
  load_floats(sd, a.d + stat0, kRows);
  auto load_keys = [&](int j, int buf) {
    load_tile(sk + buf * kTileElems, k + size_t(j) * 64 * qkv_stride, qkv_stride);
    load_tile(sv + buf * kTileElems, v + size_t(j) * 64 * qkv_stride, qkv_stride);
  };
  load_keys(0, 0);
  cp_async_commit();
  const int n = kWg * (i + 1), query0 = i * kRows + wg * 64;
  Tensor dq = make_tensor<float>(AccShape{});
  clear(dq);
  for (int j = 0; j < n; ++j) {
    const int buf = j & 1;
    cp_async_wait_all();
    __syncthreads();  // this buffer landed; the other one's readers are done
    if (j + 1 < n) load_keys(j + 1, buf ^ 1);
    cp_async_commit();
    // Skip a block whose keys all follow this warpgroup's queries (all masked).
    if (j * 64 <= query0 + 63) {
      dq_step(sq + wg * kTileElems, sdo + wg * kTileElems, sk + buf * kTileElems,
              sv + buf * kTileElems, slse + wg * 64, sd + wg * 64, query0, j * 64, dq);
    }
  }
  store_rows(a.dqkv + (size_t(b) * a.T + query0) * qkv_stride + h * kHd, qkv_stride, dq, kScale);
}

// --- statistics -----------------------------------------------------------------------------

// Eight threads per (b, t, h) row of 64 features, 16 bytes each, summed by shuffles in a fixed
// order.
__global__ void dot_do_o_kernel(const Bf* out, const Bf* dout, float* d, int T, int H) {
  const size_t idx = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t row = idx / 8;  // (b, t, h) in memory order
  const int part = int(idx % 8);
  const uint4 o = *reinterpret_cast<const uint4*>(out + row * kHd + part * 8);
  const uint4 g = *reinterpret_cast<const uint4*>(dout + row * kHd + part * 8);
  const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(&o);
  const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&g);
  float sum = 0.0f;
  for (int e = 0; e < 4; ++e) {
    const float2 of = __bfloat1622float2(o2[e]), gf = __bfloat1622float2(g2[e]);
    sum = fmaf(of.x, gf.x, sum);
    sum = fmaf(of.y, gf.y, sum);
  }
  for (int w = 4; w > 0; w /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, w, 8);
  if (part == 0) {
    const size_t h = row % H, t = (row / H) % T, b = row / (size_t(H) * T);
    d[(b * H + h) * T + t] = sum;
  }
}

// One thread per (b, h, t): the row's scores in fp32, the running maximum and sum.
__global__ void lse_reference_kernel(const Bf* qkv, float* lse, int B, int T, int H) {
  const size_t idx = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= size_t(B) * H * T) return;
  const int t = int(idx % T), h = int((idx / T) % H), b = int(idx / (size_t(T) * H));
  const size_t stride = 3 * size_t(H) * kHd;
  const Bf* q = qkv + (size_t(b) * T + t) * stride + h * kHd;
  const Bf* k0 = qkv + size_t(b) * T * stride + (H + h) * kHd;
  float qf[kHd];
  for (int e = 0; e < kHd; ++e) qf[e] = float(q[e]);
  float m = -INFINITY, l = 0.0f;
  for (int key = 0; key <= t; ++key) {
    const Bf* kr = k0 + size_t(key) * stride;
    float s = 0.0f;
    for (int e = 0; e < kHd; ++e) s = fmaf(qf[e], float(kr[e]), s);
    s *= kScale;
    if (s > m) {
      l = l * expf(m - s) + 1.0f;
      m = s;
    } else {
      l += expf(s - m);
    }
  }
  lse[idx] = m + logf(l);
}

// The two kernels of CTAs of kWg warpgroups on `stream` (those `which` names).
template <int kWg>
void launch(const Args& a, const AttnBwdShape& s, cudaStream_t stream, AttnBwdKernels which) {
  static const bool attributes_set = [] {
    RY_CUDA(cudaFuncSetAttribute(dkdv_kernel<kWg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kSmemBytes<kWg>));
    RY_CUDA(cudaFuncSetAttribute(dq_kernel<kWg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kSmemBytes<kWg>));
    return true;
  }();
  (void)attributes_set;
  const dim3 grid(unsigned(s.T / (64 * kWg)), unsigned(s.H), unsigned(s.B));
  if (which != AttnBwdKernels::kDq) {
    dkdv_kernel<kWg><<<grid, 128 * kWg, kSmemBytes<kWg>, stream>>>(a);
    RY_CUDA_LAUNCHED();
  }
  if (which != AttnBwdKernels::kDkDv) {
    dq_kernel<kWg><<<grid, 128 * kWg, kSmemBytes<kWg>, stream>>>(a);
    RY_CUDA_LAUNCHED();
  }
}

const Bf* as_bf(const cuda::bf16* p) {
  return reinterpret_cast<const Bf*>(p);
}

}  // namespace

size_t attention_backward_layout_mismatches() {
  size_t bad = 0;
  // load_tile's swizzle against both views (at a 1 KiB-aligned stand-in address).
  Bf* base = reinterpret_cast<Bf*>(uintptr_t(1) << 20);
  Tensor tk = make_tensor(make_smem_ptr(base), SmemK{});
  Tensor tm = make_tensor(make_smem_ptr(base), SmemMN{});
  for (int r = 0; r < 64; ++r) {
    for (int e = 0; e < kHd; ++e) {
      const long mine = r * 64 + (((e / 8) ^ (r % 8)) * 8) + e % 8;
      bad += raw_pointer_cast(&tk(r, e)) - base != mine;
      bad += raw_pointer_cast(&tm(e, r)) - base != mine;
    }
  }
  // Register i of the accumulator and of the RS A fragment: the same (row, column).
  Tensor id = make_identity_tensor(TileShape{});
  for (int t = 0; t < 128; ++t) {
    Tensor c = MmaSS{}.get_thread_slice(t).partition_C(id);
    Tensor a = MmaRS{}.get_thread_slice(t).partition_A(id);
    Tensor c_rs = MmaRS{}.get_thread_slice(t).partition_C(id);
    for (int i = 0; i < size(c); ++i) {
      bad += get<0>(c(i)) != get<0>(a(i)) || get<1>(c(i)) != get<1>(a(i));
      bad += get<0>(c(i)) != get<0>(c_rs(i)) || get<1>(c(i)) != get<1>(c_rs(i));
    }
  }
  return bad;
}

void check_attn_bwd_shape(const AttnBwdShape& s) {
  if (s.B <= 0 || s.H <= 0 || s.T <= 0 || s.T % 128 != 0 || s.B > 65535 || s.H > 65535) {
    throw std::invalid_argument("attention_backward_wgmma: B=" + std::to_string(s.B) +
                                " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
                                ": T must be a positive multiple of 128, B and H at most 65535");
  }
}

void attention_dot_do_o(float* d, const cuda::bf16* out, const cuda::bf16* dout,
                        const AttnBwdShape& s, cudaStream_t stream) {
  check_attn_bwd_shape(s);
  const size_t threads = size_t(s.B) * s.T * s.H * 8;  // a multiple of 256 (T % 128 == 0)
  dot_do_o_kernel<<<unsigned(threads / 256), 256, 0, stream>>>(as_bf(out), as_bf(dout), d, s.T,
                                                               s.H);
  RY_CUDA_LAUNCHED();
}

void attention_backward_wgmma(cuda::bf16* dqkv, const cuda::bf16* qkv, const cuda::bf16* dout,
                              const float* lse, const float* d, const AttnBwdShape& s,
                              cudaStream_t stream, AttnBwdKernels which, int warpgroups) {
  check_attn_bwd_shape(s);
  const Args a{as_bf(qkv), as_bf(dout), lse, d, reinterpret_cast<Bf*>(dqkv), s.T, s.H};
  if (warpgroups == 2) {
    launch<2>(a, s, stream, which);
  } else if (warpgroups == 1) {
    launch<1>(a, s, stream, which);
  } else {
    throw std::invalid_argument("attention_backward_wgmma: warpgroups " +
                                std::to_string(warpgroups) + ": 1 or 2");
  }
}

void attention_lse_reference(float* lse, const cuda::bf16* qkv, const AttnBwdShape& s,
                             cudaStream_t stream) {
  check_attn_bwd_shape(s);
  const size_t rows = size_t(s.B) * s.H * s.T;
  lse_reference_kernel<<<unsigned((rows + 127) / 128), 128, 0, stream>>>(as_bf(qkv), lse, s.B, s.T,
                                                                         s.H);
  RY_CUDA_LAUNCHED();
}

}  // namespace railyard::bench
