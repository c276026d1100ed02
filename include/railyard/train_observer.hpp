#pragma once
// What the trainer reports as it runs. Progress lines, the JSON log and the Prometheus metrics
// are observers; the trainer knows none of them.

#include <cstdint>
#include <string>

namespace railyard {

struct StepEvent {
  int64_t step = 0;  // optimizer steps completed, after this one
  int64_t total_steps = 0;
  double loss = 0;  // mean over ranks and micro-steps
  double lr = 0;
  double grad_norm = 0;     // before clipping
  double step_seconds = 0;  // wall time of this step
  double tokens_per_s = 0;  // global tokens per second of this step
  int64_t tokens_seen = 0;
  uint64_t device_mem_used = 0, device_mem_total = 0;  // 0 on CPU
};

struct EvalEvent {
  int64_t step = 0;
  double val_loss = 0;
};

struct CheckpointEvent {
  int64_t step = 0;
  std::string path;
  uint64_t bytes = 0;
  double seconds = 0;        // until durable
  double stall_seconds = 0;  // training time lost to it (the snapshot only, for async saves)
  bool async = false;
  std::string reason;  // "periodic", "signal", "final"
  // For a save on a signal: from the signal's arrival (on this rank; else the step boundary
  // where the ranks agreed to stop) until the checkpoint is durable. -1 otherwise.
  double signal_to_durable_seconds = -1;
};

struct RunEvent {
  std::string kind;  // "start", "resume", "signal", "requeue", "stop", "finish"
  int64_t step = 0;
  std::string detail;
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_run(const RunEvent&) {}
  virtual void on_step(const StepEvent&) {}
  virtual void on_eval(const EvalEvent&) {}
  virtual void on_checkpoint(const CheckpointEvent&) {}
};

}  // namespace railyard
