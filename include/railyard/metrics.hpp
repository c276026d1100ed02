#pragma once
// Run metrics in node_exporter's textfile-collector format, rewritten atomically.

#include <cstdint>
#include <string>

namespace railyard {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double tokens_per_s = 0;
  double step_seconds = 0;
  uint64_t gpu_mem_used = 0, gpu_mem_total = 0;
};

struct CheckpointMetrics {
  double unix_time = 0, seconds = 0;
  uint64_t bytes = 0;
};

}  // namespace railyard
