#pragma once
// The learning rate as a pure function of the optimizer step, so a resumed run continues the
// same curve: linear warmup, then cosine decay to a floor.
//
//   step s (0-based: the step about to be taken), peak lr, floor = lr * min_ratio:
//   s <  warmup:          lr * (s + 1) / warmup
//   warmup <= s < total:  floor + (lr - floor) * (1 + cos(pi * (s - warmup) / (total - warmup))) /
//   2 s >= total:           floor

#include <cstdint>

namespace railyard {

struct LrSchedule {
  double lr = 3e-4;
  int64_t warmup = 0;  // steps; 0 starts at the peak
  int64_t total = 1;   // steps of the run; decay ends here
  double min_ratio = 0.1;

  // Throws std::invalid_argument naming the field: lr must be positive and finite, warmup >= 0,
  // total >= 1, min_ratio in [0, 1].
  void validate() const;
  double at(int64_t step) const;
};

}  // namespace railyard
