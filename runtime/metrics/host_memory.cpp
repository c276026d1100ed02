#include "railyard/host_memory.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace railyard {
namespace {

// cgroup v2: the process's group from /proc/self/cgroup ("0::/path"), its memory.max
// ("max" when unlimited). Slurm's task/cgroup plugin sets it to the job's memory.
std::optional<uint64_t> cgroup_limit() {
  std::ifstream groups("/proc/self/cgroup");
  std::string line;
  while (std::getline(groups, line)) {
    if (!line.starts_with("0::")) continue;
    std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
    std::string value;
    if (max >> value && value != "max") return std::stoull(value);
  }
  return std::nullopt;
}

std::optional<uint64_t> mem_total() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::optional<HostMemoryReading> read_host_memory() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return std::nullopt;
  HostMemoryReading reading;
  reading.rss = resident_pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto total = mem_total();
  const auto limit = cgroup_limit();
  if (!total && !limit) return std::nullopt;
  reading.limit = limit && (!total || *limit < *total) ? *limit : total.value_or(0);
  return reading;
}

}  // namespace railyard
