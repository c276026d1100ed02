#pragma once
// The AdamW update in each memory-access shape the AdamW bench (adamw_bench.cpp) times. Not part
// of the runtime: the shape the engine takes lives in runtime/cuda/adamw_kernels.cu.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "adamw_kernels.hpp"

namespace railyard::bench {

// One update's operands, as the engine passes them (bf16 compute copy).
struct AdamWOperands {
  float* params;
  __nv_bfloat16* compute;
  float* m;
  float* v;
  const float* grads;
  const uint32_t* decay;
  size_t n;
};

struct AdamWVariant {
  const char* name;
  const char* shape;  // in words, for the table
  void (*run)(const AdamWOperands&, const railyard::cuda::AdamWStep&, cudaStream_t);
};

// The first is the reference: the engine's kernel before issue 12 (one element per thread,
// 65536 blocks of 256), whose bits every other variant must give. The last is
// railyard::cuda::adamw_update, whatever the engine runs now.
std::vector<AdamWVariant> adamw_variants();

// Keeps `stream` busy for about `microseconds`, so that what the host queues behind it (events,
// a variant's launch with its host-side set-up) runs back to back on the device: the events then
// time the kernel, not the host.
void hold_stream(unsigned microseconds, cudaStream_t stream);

}  // namespace railyard::bench
