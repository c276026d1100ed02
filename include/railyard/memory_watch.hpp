#pragma once
// The memory alert (--mem-alert) for a run without --metrics-file: a TrainObserver that feeds
// each step's device memory (GPU runs) or this rank's resident memory against its limit (CPU
// runs) to a MemoryAlert, which warns once per crossing. With --metrics-file the
// MetricsObserver does the same and also exports it.

#include <functional>
#include <string>

#include "railyard/memory_alert.hpp"
#include "railyard/train_observer.hpp"

namespace railyard {

class MemoryWatch : public TrainObserver {
 public:
  // As MemoryAlert: throws std::invalid_argument naming --mem-alert for a bad `fraction`;
  // `warn` gets the warning line (default: stderr).
  MemoryWatch(double fraction, bool recompute_possible,
              std::function<void(const std::string&)> warn = nullptr);

  void on_step(const StepEvent& event) override;
  const MemoryAlert& alert() const { return alert_; }

 private:
  MemoryAlert alert_;
};

}  // namespace railyard
