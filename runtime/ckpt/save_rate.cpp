#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <system_error>

#include "railyard/checkpoint.hpp"
#include "railyard/direct_file.hpp"
#include "railyard/durable_file.hpp"

namespace railyard {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

size_t probe_bytes(size_t wanted) {
  return std::max(DirectFile::kAlign, wanted / DirectFile::kAlign * DirectFile::kAlign);
}

}  // namespace

double measure_write_rate(const std::string& dir, size_t bytes) {
  const size_t n = probe_bytes(bytes);
  const std::string probe = dir + "/.railyard-write-probe";
  remove_file(probe);
  create_private_file(probe);
  double secs = 0;
  try {
    DirectFile file(probe, /*try_direct=*/true);
    // Written like a save: the space reserved, 4096-aligned chunks, fsync at the end.
    const size_t chunk = std::min<size_t>(n, kStagingBytes);
    std::unique_ptr<char, void (*)(void*)> mem(
        static_cast<char*>(std::aligned_alloc(DirectFile::kAlign, chunk)), &std::free);
    if (!mem) throw std::bad_alloc();
    char* buf = mem.get();
    std::memset(buf, 0x5a, chunk);
    const auto t0 = std::chrono::steady_clock::now();
    file.reserve(n);
    for (size_t off = 0; off < n; off += chunk) file.write(off, buf, std::min(chunk, n - off));
    fsync_file(probe);
    secs = seconds_since(t0);
  } catch (...) {
    remove_file(probe);
    throw;
  }
  remove_file(probe);
  return static_cast<double>(n) / std::max(secs, 1e-9);
}

double measure_copy_rate(StateSnapshot& snap, size_t bytes) {
  const size_t n = std::min(probe_bytes(bytes) / sizeof(float), snap.total());
  if (n == 0) return 0;
  const size_t staging_bytes =
      (n * sizeof(float) + DirectFile::kAlign - 1) / DirectFile::kAlign * DirectFile::kAlign;
  float* buf = snap.staging(1, staging_bytes).front();
  const auto t0 = std::chrono::steady_clock::now();
  snap.copy_out(StateArray::kParams, 0, n, buf);
  return static_cast<double>(n * sizeof(float)) / std::max(seconds_since(t0), 1e-9);
}

std::string save_budget_warning(uint64_t state_bytes, double disk_rate, double copy_rate,
                                const std::string& dir, double budget_s) {
  const double rate = copy_rate > 0 ? std::min(disk_rate, copy_rate) : disk_rate;
  const double estimate = static_cast<double>(state_bytes) / std::max(rate, 1.0);
  if (estimate <= budget_s) return "";
  char device[64] = "";
  if (copy_rate > 0) {
    std::snprintf(device, sizeof device, " and %.1f MB/s out of the device", copy_rate / 1e6);
  }
  char msg[640];
  std::snprintf(msg, sizeof msg,
                "a checkpoint of %.1f MB takes about %.1f s at the measured %.1f MB/s of '%s'%s, "
                "more than --save-budget %.1f s: a save on a signal may not finish within the "
                "grace time (raise GraceTime / the --signal lead time, or use faster storage)",
                static_cast<double>(state_bytes) / 1e6, estimate, disk_rate / 1e6, dir.c_str(),
                device, budget_s);
  return msg;
}

}  // namespace railyard
