#include "gemm_algo_config.hpp"

#include <cstdio>
#include <utility>

namespace railyard::cuda {

namespace {

// One attribute whatever its width (int32, uint32, uint16); -1 where this cuBLASLt cannot say
// (a description is no reason to fail a product).
int64_t config_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t a) {
  size_t size = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, a, nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS ||
      size == 0 || size > sizeof(uint64_t)) {
    return -1;
  }
  uint64_t v = 0;  // little-endian: the low bytes hold the value
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &v, size, &written) != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  return static_cast<int64_t>(v);
}

}  // namespace

GemmAlgoConfig algo_config_of(const cublasLtMatmulAlgo_t& algo) {
  GemmAlgoConfig c;
  c.algo_id = config_attribute(algo, CUBLASLT_ALGO_CONFIG_ID);
  c.tile_id = config_attribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
  c.stages_id = config_attribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  c.splitk = config_attribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  c.reduction = config_attribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  c.swizzle = config_attribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
  c.custom_option = config_attribute(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
  c.inner_shape_id = config_attribute(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID);
  c.cluster_shape_id = config_attribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  return c;
}

namespace {

// One field at cuBLASLt's width for it (uint16 for the shapes, 32 bits for the rest).
template <typename T>
cublasStatus_t set_field(cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t a,
                         int64_t value) {
  if (value < 0) return CUBLAS_STATUS_SUCCESS;  // this cuBLASLt could not say: keep the default
  const T v = static_cast<T>(value);
  return cublasLtMatmulAlgoConfigSetAttribute(algo, a, &v, sizeof(v));
}

}  // namespace

cublasStatus_t algo_of_config(cublasLtHandle_t handle, cublasComputeType_t compute,
                              cudaDataType_t scale, cudaDataType_t ab, cudaDataType_t cd,
                              const GemmAlgoConfig& c, cublasLtMatmulAlgo_t* algo) {
  cublasStatus_t st = cublasLtMatmulAlgoInit(handle, compute, scale, ab, ab, cd, cd,
                                             static_cast<int>(c.algo_id), algo);
  const std::pair<cublasLtMatmulAlgoConfigAttributes_t, int64_t> u32[] = {
      {CUBLASLT_ALGO_CONFIG_TILE_ID, c.tile_id},
      {CUBLASLT_ALGO_CONFIG_STAGES_ID, c.stages_id},
      {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, c.reduction},
      {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, c.swizzle},
      {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, c.custom_option}};
  for (const auto& [attr, value] : u32) {
    if (st == CUBLAS_STATUS_SUCCESS) st = set_field<uint32_t>(algo, attr, value);
  }
  if (st == CUBLAS_STATUS_SUCCESS)
    st = set_field<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, c.splitk);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = set_field<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, c.inner_shape_id);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = set_field<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c.cluster_shape_id);
  return st;
}

const char* reduction_name(int64_t scheme) {
  switch (scheme) {
    case CUBLASLT_REDUCTION_SCHEME_NONE:
      return "none";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE:
      return "inplace";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE:
      return "compute_type";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE:
      return "output_type";
    case -1:
      return "unknown";
    default:
      return "other";
  }
}

std::string to_string(const GemmAlgoConfig& c) {
  char s[200];
  std::snprintf(s, sizeof s,
                "algo %lld tile %lld stages %lld splitK %lld reduction %s swizzle %lld custom %lld "
                "inner %lld cluster %lld",
                static_cast<long long>(c.algo_id), static_cast<long long>(c.tile_id),
                static_cast<long long>(c.stages_id), static_cast<long long>(c.splitk),
                reduction_name(c.reduction), static_cast<long long>(c.swizzle),
                static_cast<long long>(c.custom_option), static_cast<long long>(c.inner_shape_id),
                static_cast<long long>(c.cluster_shape_id));
  return s;
}

}  // namespace railyard::cuda
