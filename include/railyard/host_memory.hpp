#pragma once
// This process's host memory and the limit that applies to it (Slurm puts each job in a
// cgroup with memory.max), so CPU runs get the same memory metrics and alert as GPU runs.

#include <cstdint>
#include <optional>

namespace railyard {

struct HostMemoryReading {
  uint64_t rss = 0;    // resident set of this process, bytes
  uint64_t limit = 0;  // the cgroup's memory.max, else the machine's MemTotal, bytes
};

// nullopt when /proc is unreadable.
std::optional<HostMemoryReading> read_host_memory();

}  // namespace railyard
