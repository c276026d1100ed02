#pragma once
// Command-line values of the GPU benches (gemm_epilogue_bench, gemm_step_survey).

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace railyard::bench {

// `value` of `flag` as an integer in [1, max]; anything else is an error naming both.
inline int positive(const std::string& flag, const char* value, long max) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v <= 0 || v > max) {
    throw std::invalid_argument(flag + " " + value + ": expected a positive integer up to " +
                                std::to_string(max));
  }
  return static_cast<int>(v);
}

}  // namespace railyard::bench
