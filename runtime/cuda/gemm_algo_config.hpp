#pragma once
// What a cuBLASLt algorithm is, as its configuration attributes say it: the id of the kernel
// family and the tile, stages, split-K, reduction, swizzle, custom option, inner and cluster
// shape chosen within it. Two algorithms with equal configurations run the same kernels, so a
// configuration names an algorithm across processes (benches print it, pins match it).

#include <cublasLt.h>

#include <cstdint>
#include <string>
#include <tuple>

namespace railyard::cuda {

// Each field is cuBLASLt's value (tile, stages, inner and cluster shapes are the enum values of
// cublasLt.h: cublasLtMatmulTile_t, cublasLtMatmulStages_t, ...); -1 where this cuBLASLt cannot
// say.
struct GemmAlgoConfig {
  int64_t algo_id = -1, tile_id = -1, stages_id = -1, splitk = -1, reduction = -1, swizzle = -1,
          custom_option = -1, inner_shape_id = -1, cluster_shape_id = -1;
  // Spelled out: .cu files include this as C++17.
  auto fields() const {
    return std::tie(algo_id, tile_id, stages_id, splitk, reduction, swizzle, custom_option,
                    inner_shape_id, cluster_shape_id);
  }
  bool operator==(const GemmAlgoConfig& o) const { return fields() == o.fields(); }
  bool operator!=(const GemmAlgoConfig& o) const { return !(*this == o); }
};

GemmAlgoConfig algo_config_of(const cublasLtMatmulAlgo_t& algo);

// The algorithm `c` names, for these types: cublasLtMatmulAlgoInit with its id, then each field
// that is not -1 set. The first status that is not success where cuBLASLt refuses the id or a
// field (another GPU or library); whether it runs a given product, cublasLtMatmulAlgoCheck says.
cublasStatus_t algo_of_config(cublasLtHandle_t handle, cublasComputeType_t compute,
                              cudaDataType_t scale, cudaDataType_t ab, cudaDataType_t cd,
                              const GemmAlgoConfig& c, cublasLtMatmulAlgo_t* algo);

// "none", "inplace", "compute_type", "output_type"; "unknown" for -1, "other" otherwise.
const char* reduction_name(int64_t scheme);

// "algo 39 tile 20 stages 35 splitK 1 reduction none swizzle 0 custom 0 inner 0 cluster 5".
std::string to_string(const GemmAlgoConfig& c);

}  // namespace railyard::cuda
