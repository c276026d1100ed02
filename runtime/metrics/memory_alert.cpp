#include "railyard/memory_alert.hpp"

#include <cstdio>
#include <stdexcept>
#include <utility>

namespace railyard {
namespace {

// Re-arm below this share of the threshold, so usage hovering at the line warns once.
constexpr double kRearm = 0.95;

std::string percent(double ratio) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f%%", 100.0 * ratio);
  return buffer;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) {
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buffer, sizeof buffer, value < 10 ? "%.2f %s" : "%.1f %s", value, units[unit]);
  }
  return buffer;
}

MemoryAlert::MemoryAlert(double fraction, std::function<void(const std::string&)> warn,
                         bool recompute_possible)
    : fraction_(fraction), warn_(std::move(warn)), recompute_possible_(recompute_possible) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    throw std::invalid_argument("--mem-alert " + std::to_string(fraction) +
                                " is not a fraction of memory: give a value in (0, 1], e.g. 0.9");
  }
}

bool MemoryAlert::update(uint64_t used, uint64_t total, int64_t step, const std::string& device) {
  if (total == 0) return above_;
  const double ratio = static_cast<double>(used) / static_cast<double>(total);
  if (!above_ && ratio >= fraction_) {
    above_ = true;
    ++crossings_;
    if (warn_) {
      const bool gpu = device.rfind("GPU", 0) == 0;
      warn_("railyard: warning: " + device + " memory " + percent(ratio) + " used (" +
            format_bytes(used) + " of " + format_bytes(total) + ") at step " +
            std::to_string(step) + ", above --mem-alert " + percent(fraction_) +
            "; an out-of-memory failure may follow: consider a smaller --batch with more "
            "--grad-accum" +
            (gpu && recompute_possible_ ? ", or --recompute" : ""));
    }
  } else if (above_ && ratio < fraction_ * kRearm) {
    above_ = false;
  }
  return above_;
}

std::string describe_out_of_memory(const OutOfMemoryContext& c) {
  std::string message = "out of device memory while allocating " + format_bytes(c.requested_bytes) +
                        " for " + (c.what.empty() ? std::string("an unnamed buffer") : c.what);
  if (c.total_bytes > 0) {
    message += " (" + format_bytes(c.free_bytes) + " free of " + format_bytes(c.total_bytes) + ")";
  }
  message += ". Try: ";
  if (c.batch > 1) {
    const int64_t half = c.batch / 2;
    const int64_t accum = c.grad_accum > 0 ? c.grad_accum : 1;
    message += "--batch " + std::to_string(half) + " --grad-accum " +
               std::to_string(accum * c.batch / half) + " (same global batch, about half the " +
               "activation memory; now --batch " + std::to_string(c.batch) + " --grad-accum " +
               std::to_string(accum) + ")";
  } else {
    message +=
        "a smaller --batch with a larger --grad-accum (the same global batch in smaller "
        "pieces)";
  }
  if (!c.recompute) {
    message +=
        ", or --recompute (recompute activations in the backward pass instead of "
        "storing them)";
  }
  message += "; another process on the GPU also takes memory: check nvidia-smi.";
  return message;
}

}  // namespace railyard
