#pragma once
// Kernels of the step's GEMM survey (gemm_step_survey.cpp), also the AdamW bench's
// (adamw_bench.cpp): inputs filled on the device (the LM head's operands and the optimizer's
// state are hundreds of MB) and outputs compared on the device.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace railyard::bench {

// p[i] = uniform in [-scale, scale] from a hash of (seed, i): the same values every run.
// bf16 where `bf16` is true, else fp32.
void fill_uniform(void* p, size_t n, bool bf16, float scale, uint64_t seed, cudaStream_t stream);

struct Comparison {
  bool same_bits = true;
  double max_abs_diff = 0, max_abs_ref = 0;  // infinite diff where a value is not finite
};

// a against ref, n values of bf16 (`bf16`) or fp32. `scratch` holds 3 uint32.
Comparison compare(const void* a, const void* ref, size_t n, bool bf16, unsigned* scratch,
                   cudaStream_t stream);

}  // namespace railyard::bench
