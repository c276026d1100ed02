#pragma once
// The algorithm configurations a GEMM survey tries beyond the heuristic's own few (issue 12):
// what each cuBLASLt algorithm says it can do (tiles, stages, split-K, reductions, swizzle,
// custom options), and from that a bounded, ordered list of configurations that only ever reduce
// split-K parts in a fixed order. Nothing here runs a product: cublasLtMatmulAlgoCheck and a
// timed run decide which of them work and which is faster.

#include <cublasLt.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gemm_algo_config.hpp"

namespace railyard::cuda {

// One algorithm id's capabilities, as cublasLtMatmulAlgoCapGetAttribute reports them.
struct GemmAlgoCaps {
  int64_t algo_id = -1;
  std::vector<int64_t> tiles, stages;  // empty: the algorithm takes only "undefined"
  bool splitk = false, swizzle = false;
  uint32_t reduction_mask = 0;  // cublasLtReductionScheme_t bits
  int64_t custom_option_max = 0;
};

// True where the configuration adds split-K parts in a fixed order: no split, or a reduction in
// a separate kernel (compute or output type). "In place" reductions add parts in the output as
// they finish, so the bits vary run to run; they are never surveyed nor pinned.
bool fixed_order(const GemmAlgoConfig& c);

// The configurations to try, at most `limit`, without repeats, in this order:
//   1. the seeds (the heuristic's candidates, its order), those of fixed order;
//   2. for each seed, the configurations one field away from it: every tile and stages id of its
//      algorithm, split-K 1..16 with each fixed-order reduction the algorithm offers, the other
//      swizzle, each custom option (up to 8), and the common cluster shapes (where the seed has
//      one, i.e. sm_90 and later);
//   3. for each seed, every tile x stages pair of its algorithm;
//   4. for each algorithm that no seed names, every tile x stages pair with the defaults.
// Caps name algorithms by id; a seed whose algorithm has no caps gets no neighbours.
std::vector<GemmAlgoConfig> config_space(const std::vector<GemmAlgoConfig>& seeds,
                                         const std::vector<GemmAlgoCaps>& caps, size_t limit);

// Capabilities of every algorithm cuBLASLt has for these types (cublasLtMatmulAlgoGetIds, then
// Init and CapGetAttribute for each); an algorithm that does not initialise is left out.
std::vector<GemmAlgoCaps> algo_caps(cublasLtHandle_t handle, cublasComputeType_t compute,
                                    cudaDataType_t scale, cudaDataType_t ab, cudaDataType_t cd);

}  // namespace railyard::cuda
