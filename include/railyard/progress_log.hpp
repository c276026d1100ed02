#pragma once
// The human-readable progress log of rank 0: one line per reported step and event, in a
// stable format that scripts may grep (documented in docs/training.md):
//
//   step 120/1000 | loss 2.345678 | lr 5.99e-04 | norm 0.812 | 41230 tok/s | 99.3 ms/step | ETA
//   1m27s eval step 120 | val_loss 2.401234 checkpoint step 120 | /ckpt/step_00000120.h5 | 12.3 MB
//   in 0.081 s | stall 2.1 ms | periodic run resume | step 120 | from /ckpt/step_00000120.h5

#include <chrono>
#include <cstdio>
#include <string>

#include "railyard/train_observer.hpp"

namespace railyard {

// "1h02m03s", "4m05s" or "6s".
std::string format_duration(double seconds);

class ProgressLog : public TrainObserver {
 public:
  // A step line every `every` steps (and the last step); 0 prints no step lines.
  ProgressLog(std::FILE* out, int64_t every);

  void on_run(const RunEvent& e) override;
  void on_step(const StepEvent& e) override;
  void on_eval(const EvalEvent& e) override;
  void on_checkpoint(const CheckpointEvent& e) override;

 private:
  std::FILE* out_;
  int64_t every_;
  // ETA from the mean step time of this process, the first step (warm-up) excluded.
  double timed_seconds_ = 0;
  int64_t timed_steps_ = 0;
  bool first_ = true;
};

}  // namespace railyard
