#include "railyard/memory_watch.hpp"

#include <cstdio>
#include <utility>

#include "railyard/host_memory.hpp"
#include "railyard/nvml_probe.hpp"

namespace railyard {
namespace {

void warn_stderr(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

MemoryWatch::MemoryWatch(double fraction, bool recompute_possible,
                         std::function<void(const std::string&)> warn)
    : alert_(fraction, warn ? std::move(warn) : warn_stderr, recompute_possible) {}

void MemoryWatch::on_step(const StepEvent& e) {
  if (e.device_mem_total > 0) {
    alert_.update(e.device_mem_used, e.device_mem_total, e.step,
                  "GPU " + nvml_device_from_environment());
  } else if (const auto host = read_host_memory()) {
    alert_.update(host->rss, host->limit, e.step, "host");
  }
}

}  // namespace railyard
