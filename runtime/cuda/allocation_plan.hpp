#pragma once
// The engine's device memory as one plan: every buffer (parameters, gradients, optimizer
// state, activations, scratch) is named and placed once at start, then taken from a single
// allocation, so memory use is known before training and never grows.

#include <cstddef>
#include <string>
#include <vector>

namespace railyard::cuda {

class AllocationPlan {
 public:
  static constexpr size_t kAlignBytes = 256;
  // What `bytes` takes in the plan (each buffer starts on a kAlignBytes boundary).
  static size_t aligned(size_t bytes) {
    return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  }

  // Reserves `bytes` under `name` (for the report) and returns its byte offset.
  size_t add(const std::string& name, size_t bytes);
  // Buffers never live at the same time share one region: each group is one set of buffers
  // live together, placed one after another (each aligned); the groups overlay each other.
  // Reserves the largest group under `name` and returns every buffer's offset, group by group.
  std::vector<std::vector<size_t>> add_overlaid(const std::string& name,
                                                const std::vector<std::vector<size_t>>& groups);
  size_t total() const { return total_; }
  // The largest entries, one per line, for logs and out-of-memory messages.
  std::string summary(size_t top = 8) const;

 private:
  struct Entry {
    std::string name;
    size_t offset, bytes;
  };
  std::vector<Entry> entries_;
  size_t total_ = 0;
};

}  // namespace railyard::cuda
