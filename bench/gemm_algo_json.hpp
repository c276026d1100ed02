#pragma once
// A cuBLASLt heuristic result as the GEMM benches report it (gemm_epilogue_bench,
// gemm_step_survey): the configuration gemm_algo_config.hpp reads, in words too, with the
// heuristic's workspace and waves; and the benches' JSON output.

#include <cublasLt.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "gemm_algo_config.hpp"

namespace railyard::bench {

inline nlohmann::json describe(const cublasLtMatmulHeuristicResult_t& r) {
  const auto c = railyard::cuda::algo_config_of(r.algo);
  return {{"algo_id", c.algo_id},
          {"tile_id", c.tile_id},
          {"stages_id", c.stages_id},
          {"splitk", c.splitk},
          {"reduction", railyard::cuda::reduction_name(c.reduction)},
          {"swizzle", c.swizzle},
          {"custom_option", c.custom_option},
          {"inner_shape_id", c.inner_shape_id},
          {"cluster_shape_id", c.cluster_shape_id},
          {"workspace_bytes", r.workspaceSize},
          {"waves", r.wavesCount},
          {"config", to_string(c)}};
}

// The bench's --json output; an unwritable path is an error naming it.
inline void write_json(const std::string& path, const nlohmann::json& j) {
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  if (!f) throw std::runtime_error("cannot write " + path + ": check the directory exists");
}

}  // namespace railyard::bench
