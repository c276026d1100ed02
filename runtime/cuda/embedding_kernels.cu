#include <cub/device/device_radix_sort.cuh>

#include <stdexcept>
#include <string>

#include "cuda_check.hpp"
#include "device_math.cuh"
#include "dtype.hpp"
#include "embedding_kernels.hpp"

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

__global__ void iota_kernel(uint32_t* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = static_cast<uint32_t>(i);
}

// Block i handles sorted entry i if it starts a run of equal tokens: it adds the run's rows of
// dout (ascending positions: the sort is stable) and then adds that sum to the token's row.
template <typename T>
__global__ void embedding_wte_backward_kernel(float* dwte, const T* dout, const uint32_t* keys,
                                              const uint32_t* pos, int N, int C) {
  const int i = blockIdx.x;
  const uint32_t tok = keys[i];
  if (i > 0 && keys[i - 1] == tok) return;
  int end = i + 1;
  while (end < N && keys[end] == tok) ++end;
  constexpr int kN = Pack<T>::kN;
  for (int q = threadIdx.x; q < C / kN; q += blockDim.x) {
    float s[kN] = {};
    for (int j = i; j < end; ++j) {
      Pack<T> p = load_pack(dout + size_t(pos[j]) * C + q * kN);
#pragma unroll
      for (int k = 0; k < kN; ++k) s[k] += to_f(p.v[k]);
    }
    float* row = dwte + size_t(tok) * C + q * kN;
#pragma unroll
    for (int k = 0; k < kN; ++k) row[k] += s[k];
  }
}

// One thread per (t, c): the sum over the batch needs no atomics.
template <typename T>
__global__ void embedding_wpe_backward_kernel(float* dwpe, const T* dout, int B, int Tn, int C,
                                              bool accumulate) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i >= size_t(Tn) * C) return;
  float s = 0.0f;
  for (int b = 0; b < B; ++b) s += to_f(dout[size_t(b) * Tn * C + i]);
  dwpe[i] = accumulate ? dwpe[i] + s : s;
}

// The scratch of the backward pass: positions, sorted keys and positions, then CUB's own.
struct SortScratch {
  uint32_t *pos_in, *keys_out, *pos_out;
  void* temp;
  size_t temp_bytes;
};

size_t align256(size_t n) {
  return (n + 255) / 256 * 256;
}

int key_bits(int vocab) {
  int bits = 1;
  while (bits < 32 && (uint32_t(1) << bits) < uint32_t(vocab)) ++bits;
  return bits;
}

size_t sort_temp_bytes(int N, int vocab) {
  size_t bytes = 0;
  RY_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const uint32_t*>(nullptr),
                                          static_cast<uint32_t*>(nullptr),
                                          static_cast<const uint32_t*>(nullptr),
                                          static_cast<uint32_t*>(nullptr), N, 0, key_bits(vocab)));
  return bytes;
}

SortScratch carve(void* scratch, int N, int vocab) {
  char* p = static_cast<char*>(scratch);
  const size_t a = align256(size_t(N) * sizeof(uint32_t));
  return {reinterpret_cast<uint32_t*>(p), reinterpret_cast<uint32_t*>(p + a),
          reinterpret_cast<uint32_t*>(p + 2 * a), p + 3 * a, sort_temp_bytes(N, vocab)};
}

int blocks_for(size_t n, int threads) {
  size_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 65536 ? b : 65536);
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tn,
                       int C, cudaStream_t stream) {
  constexpr int kN = Pack<T>::kN;
  if (C % kN != 0) {
    throw std::invalid_argument("embedding_forward: dim " + std::to_string(C) +
                                " is not a multiple of " + std::to_string(kN) +
                                " (the kernel moves 16-byte vectors)");
  }
  const size_t packs = size_t(B) * Tn * C / kN;
  embedding_forward_kernel<<<blocks_for(packs, 256), 256, 0, stream>>>(out, tokens, wte, wpe, Tn, C,
                                                                       packs);
  RY_CUDA_LAUNCHED();
}

size_t embedding_backward_scratch_bytes(int N, int vocab) {
  return 3 * align256(size_t(N) * sizeof(uint32_t)) + sort_temp_bytes(N, vocab);
}

template <typename T>
void embedding_backward(float* dwte, float* dwpe, void* scratch, const T* dout,
                        const int32_t* tokens, int B, int Tn, int C, int vocab, bool accumulate_wpe,
                        cudaStream_t stream) {
  const int N = B * Tn;
  SortScratch s = carve(scratch, N, vocab);
  iota_kernel<<<(N + 255) / 256, 256, 0, stream>>>(s.pos_in, N);
  RY_CUDA_LAUNCHED();
  // Tokens were checked to lie in [0, vocab) on the host: as unsigned keys they sort the same.
  RY_CUDA(cub::DeviceRadixSort::SortPairs(s.temp, s.temp_bytes,
                                          reinterpret_cast<const uint32_t*>(tokens), s.keys_out,
                                          s.pos_in, s.pos_out, N, 0, key_bits(vocab), stream));
  embedding_wte_backward_kernel<<<N, 128, 0, stream>>>(dwte, dout, s.keys_out, s.pos_out, N, C);
  RY_CUDA_LAUNCHED();
  size_t tc = size_t(Tn) * C;
  embedding_wpe_backward_kernel<<<static_cast<int>((tc + 255) / 256), 256, 0, stream>>>(
      dwpe, dout, B, Tn, C, accumulate_wpe);
  RY_CUDA_LAUNCHED();
}

#define RY_INSTANTIATE(T)                                                                        \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int,      \
                                     cudaStream_t);                                              \
  template void embedding_backward<T>(float*, float*, void*, const T*, const int32_t*, int, int, \
                                      int, int, bool, cudaStream_t);
RY_INSTANTIATE(float)
RY_INSTANTIATE(bf16)
#undef RY_INSTANTIATE

}  // namespace railyard::cuda
