#pragma once
// cuBLASLt algorithms pinned per product by a fixed table (issue 12). A survey on one GPU and
// cuBLASLt (bench/gemm_step_survey.cpp, stage gemmsurvey of bench/gpu_bench.sh) found each
// faster than the heuristic's first with the same bits every run; the table, never timing at
// run time, chooses them, so two runs build the same algorithm. A product the table does not
// name (another GPU, library or shape), or whose pinned configuration neither is among the
// heuristic's candidates nor initialises and passes cublasLtMatmulAlgoCheck, keeps the
// heuristic's first. A pin names any configuration the survey timed, enumerated ones included:
// GemmAlgoConfig holds every field cuBLASLt configures (custom option, inner and cluster shape).

#include <cublasLt.h>
#include <library_types.h>

#include <cstddef>
#include <optional>
#include <tuple>
#include <vector>

#include "gemm_algo_config.hpp"

namespace railyard::cuda {

// A product as the table knows it: the column-major GemmCall Matmul issues (m, n, k, transposes,
// types, epilogue, beta != 0, batch) on one GPU architecture and cuBLASLt version. The leading
// dimensions are not part of it: a pin is only used when the heuristic offers its algorithm for
// the product's own descriptors.
struct GemmPinKey {
  int sm = 0;                   // compute capability, major * 10 + minor
  size_t cublaslt_version = 0;  // cublasLtGetVersion(), e.g. 130100 for 13.1.0
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  cudaDataType_t ab_type = CUDA_R_16BF, d_type = CUDA_R_16BF;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool beta_nonzero = false;
  int batch = 1;
  // Spelled out: .cu files include this as C++17.
  auto fields() const {
    return std::tie(sm, cublaslt_version, trans_a, trans_b, m, n, k, ab_type, d_type, epilogue,
                    beta_nonzero, batch);
  }
  bool operator==(const GemmPinKey& o) const { return fields() == o.fields(); }
};

struct GemmPin {
  GemmPinKey key;
  GemmAlgoConfig algo;
};

// The table, one entry per pinned product.
const std::vector<GemmPin>& gemm_pins();

// The algorithm `table` pins for `key`; none where it names no such product.
std::optional<GemmAlgoConfig> pinned_algo(const GemmPinKey& key,
                                          const std::vector<GemmPin>& table = gemm_pins());

// The first of `candidates` whose configuration is `pin` in every field; none where none is.
std::optional<size_t> find_pinned(const std::vector<GemmAlgoConfig>& candidates,
                                  const GemmAlgoConfig& pin);

}  // namespace railyard::cuda
