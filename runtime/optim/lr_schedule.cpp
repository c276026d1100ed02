#include "railyard/lr_schedule.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace railyard {

void LrSchedule::validate() const {
  if (!(lr > 0) || !std::isfinite(lr)) {
    throw std::invalid_argument("learning rate (lr) must be a positive number, got " +
                                std::to_string(lr));
  }
  if (warmup < 0) {
    throw std::invalid_argument("warmup must be >= 0 steps, got " + std::to_string(warmup));
  }
  if (total < 1) {
    throw std::invalid_argument("total steps must be >= 1, got " + std::to_string(total));
  }
  if (!(min_ratio >= 0 && min_ratio <= 1)) {
    throw std::invalid_argument(
        "min_ratio (floor of the cosine decay, a fraction of lr) must be "
        "in [0, 1], got " +
        std::to_string(min_ratio));
  }
}

double LrSchedule::at(int64_t step) const {
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double floor = lr * min_ratio;
  if (step >= total) return floor;
  // warmup < total here, since warmup <= step < total.
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
  return floor + (lr - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace railyard
