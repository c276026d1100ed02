#pragma once
// The machine-readable log (--log-json): one JSON object per line, appended, flushed per line.
// Every object has "type" ("step", "eval", "checkpoint", "run") and "time" (Unix seconds); the
// other keys are the fields of the matching TrainObserver event (train_observer.hpp), plus
// "step_ms" on step lines. Floats round-trip exactly. See docs/training.md.

#include <cstdio>
#include <string>

#include "railyard/train_observer.hpp"

namespace railyard {

class JsonLog : public TrainObserver {
 public:
  // Opens `path` for appending; throws std::runtime_error naming it when that fails.
  explicit JsonLog(const std::string& path);
  ~JsonLog() override;
  JsonLog(const JsonLog&) = delete;
  JsonLog& operator=(const JsonLog&) = delete;

  void on_run(const RunEvent& e) override;
  void on_step(const StepEvent& e) override;
  void on_eval(const EvalEvent& e) override;
  void on_checkpoint(const CheckpointEvent& e) override;

 private:
  void write(const std::string& line);
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace railyard
