#pragma once
// Command-line values of the GPU benches (gemm_epilogue_bench, gemm_step_survey, adamw_bench,
// layernorm_bench).

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

// --warmup N --reps N --json FILE, the options of the benches that time kernels by rounds.
struct TimingOptions {
  int warmup = 5, reps = 30;
  std::string json;
};

// Parses argv into TimingOptions; an unknown option, a missing value or fewer than 20 reps is an
// error that ends with `usage`.
inline TimingOptions parse_timing(int argc, char** argv, const char* usage) {
  TimingOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(a + ": unknown or without a value\n" + usage);
    const char* value = argv[++i];
    if (a == "--warmup")
      o.warmup = positive(a, value, 1000);
    else if (a == "--reps")
      o.reps = positive(a, value, 100000);
    else if (a == "--json")
      o.json = value;
    else
      throw std::invalid_argument("unknown option " + a + "\n" + usage);
  }
  if (o.reps < 20) throw std::invalid_argument("--reps below 20: the median needs at least 20");
  return o;
}

}  // namespace railyard::bench
