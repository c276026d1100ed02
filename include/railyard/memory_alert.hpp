#pragma once
// Device memory pressure: a warning when used memory crosses a fraction of the total, and a
// readable message for an out-of-memory failure. Free of CUDA: callers pass sizes and names.

#include <cstdint>
#include <functional>
#include <string>

namespace railyard {

class MemoryAlert {
 public:
  // `fraction` of total memory in (0, 1] (the --mem-alert option); throws
  // std::invalid_argument naming --mem-alert otherwise. `warn` receives one line per crossing,
  // with advice the run can follow: --recompute only for a GPU reading when
  // `recompute_possible` (the CUDA engine, not yet on), never for host memory.
  MemoryAlert(double fraction, std::function<void(const std::string&)> warn,
              bool recompute_possible = false);

  // Feeds one reading of `device` ("GPU 0", "host") at `step`. Warns when usage goes from below
  // the threshold to at or above it; re-arms only after usage falls below 95% of the threshold,
  // so a value hovering at the line does not flood the log. Returns above().
  bool update(uint64_t used, uint64_t total, int64_t step, const std::string& device);
  bool above() const { return above_; }
  int64_t crossings() const { return crossings_; }
  double fraction() const { return fraction_; }

 private:
  double fraction_;
  std::function<void(const std::string&)> warn_;
  bool recompute_possible_;
  bool above_ = false;
  int64_t crossings_ = 0;
};

// What was being allocated when device memory ran out, and the run's knobs that decide memory.
struct OutOfMemoryContext {
  std::string what;  // e.g. "activations of layer 7 (attention scores)"
  uint64_t requested_bytes = 0;
  uint64_t free_bytes = 0;   // 0 when unknown
  uint64_t total_bytes = 0;  // 0 when unknown
  int64_t batch = 0;         // micro-batch per GPU (--batch); 0 when unknown
  int64_t grad_accum = 0;    // --grad-accum; 0 when unknown
  bool recompute = false;    // --recompute already on
};

// One paragraph: what failed, how much was asked for and what was free, and what to try
// (a smaller --batch, more --grad-accum to keep the global batch, --recompute).
std::string describe_out_of_memory(const OutOfMemoryContext& context);

// "1.50 GiB", "512 MiB", "1.0 KiB", "17 B".
std::string format_bytes(uint64_t bytes);

}  // namespace railyard
