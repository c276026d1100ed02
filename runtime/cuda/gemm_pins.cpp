#include "gemm_pins.hpp"

#include <algorithm>

namespace railyard::cuda {

namespace {

// GPT-2 124M at B=16, T=1024 (N = 16384 rows, C = 768, 4C = 3072) on an H200 (sm_90) with
// cuBLASLt 13.1.0; entries from bench/results/gemm-survey.json's "pick_config" per product,
// fields in GemmAlgoConfig's order (tile, stages and cluster are cublasLt.h's enum values).
GemmPinKey gpt2_124m_h200(bool trans_a, bool trans_b, int m, int n, int k, cudaDataType_t d_type,
                          cublasLtEpilogue_t epilogue, bool beta_nonzero) {
  return {90, 130100, trans_a, trans_b, m, n, k, CUDA_R_16BF, d_type, epilogue, beta_nonzero, 1};
}

std::vector<GemmPin> make_table() {
  return {
      // fc2 backward into the fc layer, dX^T[4C, N] = W^T dY^T * GELU'(pre): 141.9 us against
      // the heuristic's first's 152.5 us (bench/gemm_epilogue_bench, candidate #3), same bits
      // every run. Tile 128x128 (20), stages 64xAUTO (35), cluster 1x2x1 (5).
      {gpt2_124m_h200(false, false, 3072, 16384, 768, CUDA_R_16BF, CUBLASLT_EPILOGUE_DGELU, false),
       {39, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 0, 0, 5}},
  };
}

}  // namespace

const std::vector<GemmPin>& gemm_pins() {
  static const std::vector<GemmPin> table = make_table();
  return table;
}

std::optional<GemmAlgoConfig> pinned_algo(const GemmPinKey& key,
                                          const std::vector<GemmPin>& table) {
  const auto it =
      std::find_if(table.begin(), table.end(), [&](const GemmPin& p) { return p.key == key; });
  if (it == table.end()) return std::nullopt;
  return it->algo;
}

std::optional<size_t> find_pinned(const std::vector<GemmAlgoConfig>& candidates,
                                  const GemmAlgoConfig& pin) {
  const auto it = std::find(candidates.begin(), candidates.end(), pin);
  if (it == candidates.end()) return std::nullopt;
  return static_cast<size_t>(it - candidates.begin());
}

}  // namespace railyard::cuda
