#include "gemm_pins.hpp"

#include <algorithm>

namespace railyard::cuda {

namespace {

// GPT-2 124M at B=16, T=1024 (N = 16384 rows, C = 768, 4C = 3072) on an H200 (sm_90) with
// cuBLASLt 13.1.0; entries from bench/results/gemm-survey.json (device call of 2026-12-02
// 00:50 UTC, commit 97848e2): each product whose "pick" is not the heuristic's first, by the
// survey's fixed rule (same bits every run, within 1e-2 of the first, >= 3% faster). Fields in
// GemmAlgoConfig's order (tile, stages and cluster are cublasLt.h's enum values).
GemmPinKey gpt2_124m_h200(bool trans_a, bool trans_b, int m, int n, int k, cudaDataType_t d_type,
                          cublasLtEpilogue_t epilogue, bool beta_nonzero) {
  return {90, 130100, trans_a, trans_b, m, n, k, CUDA_R_16BF, d_type, epilogue, beta_nonzero, 1};
}

std::vector<GemmPin> make_table() {
  return {
      // qkv forward bias: 86.7 us against the heuristic's first's 89.9 us (#1), same bits.
      {gpt2_124m_h200(true, false, 2304, 16384, 768, CUDA_R_16BF, CUBLASLT_EPILOGUE_BIAS, false),
       {66, 24, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 7, 0, 5}},
      // attn-proj forward bias: 31.2 us against the heuristic's first's 34.1 us (#7), same bits.
      {gpt2_124m_h200(true, false, 768, 16384, 768, CUDA_R_16BF, CUBLASLT_EPILOGUE_BIAS, false),
       {66, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 1, 0, 3}},
      // fc2 backward-input dgelu: 146.0 us against the heuristic's first's 168.1 us (#3), same
      // bits.
      {gpt2_124m_h200(false, false, 3072, 16384, 768, CUDA_R_16BF, CUBLASLT_EPILOGUE_DGELU, false),
       {39, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 0, 0, 5}},
      // fc2 backward-weight =: 105.7 us against the heuristic's first's 111.8 us (#1), same bits.
      {gpt2_124m_h200(false, true, 3072, 768, 16384, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, false),
       {66, 29, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 1, 0, 4}},
      // attn-proj backward-input: 31.0 us against the heuristic's first's 33.2 us (#7), same bits.
      {gpt2_124m_h200(false, false, 768, 16384, 768, CUDA_R_16BF, CUBLASLT_EPILOGUE_DEFAULT, false),
       {66, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 1, 0, 3}},
      // attn-proj backward-weight =: 35.9 us against the heuristic's first's 37.4 us (#1), same
      // bits.
      {gpt2_124m_h200(false, true, 768, 768, 16384, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, false),
       {66, 29, 35, 4, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, 0, 1, 0, 3}},
      // fc2 backward-weight += (grad accumulation): 107.7 us against the heuristic's first's 119.8
      // us (#1), same bits.
      {gpt2_124m_h200(false, true, 3072, 768, 16384, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, true),
       {66, 29, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 1, 0, 4}},
      // fc1 backward-weight += (grad accumulation): 106.7 us against the heuristic's first's 110.8
      // us (#1), same bits.
      {gpt2_124m_h200(false, true, 768, 3072, 16384, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, true),
       {66, 29, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 3, 0, 9}},
      // attn-proj backward-weight += (grad accumulation): 37.9 us against the heuristic's
      // first's 39.4 us (#1), same bits.
      {gpt2_124m_h200(false, true, 768, 768, 16384, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, true),
       {66, 29, 35, 4, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, 0, 1, 0, 3}},
      // lm-head forward (4096 rows): 397.0 us against the heuristic's first's 433.4 us (#5), same
      // bits.
      {gpt2_124m_h200(true, false, 50304, 4096, 768, CUDA_R_16BF, CUBLASLT_EPILOGUE_DEFAULT, false),
       {66, 201, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 2, 0, 5}},
      // lm-head backward-weight = (4096 rows): 409.1 us against the heuristic's first's 437.7 us
      // (#6), same bits.
      {gpt2_124m_h200(false, true, 768, 50304, 4096, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, false),
       {66, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 3, 0, 5}},
      // lm-head backward-weight += (4096 rows): 422.6 us against the heuristic's first's 442.5 us
      // (#6), same bits.
      {gpt2_124m_h200(false, true, 768, 50304, 4096, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, true),
       {66, 20, 35, 1, CUBLASLT_REDUCTION_SCHEME_NONE, 0, 3, 0, 5}},
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
