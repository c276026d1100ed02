#include "railyard/progress_log.hpp"

#include <algorithm>
#include <cmath>

namespace railyard {

std::string format_duration(double seconds) {
  long s = std::lround(std::max(0.0, seconds));
  char buf[64];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", s / 3600, s / 60 % 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", s);
  }
  return buf;
}

ProgressLog::ProgressLog(std::FILE* out, int64_t every) : out_(out), every_(every) {}

void ProgressLog::on_run(const RunEvent& e) {
  std::fprintf(out_, "run %s | step %lld%s%s\n", e.kind.c_str(), static_cast<long long>(e.step),
               e.detail.empty() ? "" : " | ", e.detail.c_str());
  std::fflush(out_);
}

void ProgressLog::on_step(const StepEvent& e) {
  if (first_) {
    first_ = false;
  } else {
    timed_seconds_ += e.step_seconds;
    ++timed_steps_;
  }
  if (every_ <= 0 || (e.step % every_ != 0 && e.step != e.total_steps)) return;
  double mean =
      timed_steps_ > 0 ? timed_seconds_ / static_cast<double>(timed_steps_) : e.step_seconds;
  double eta = mean * static_cast<double>(e.total_steps - e.step);
  std::fprintf(out_,
               "step %lld/%lld | loss %.6f | lr %.2e | norm %.3f | %.0f tok/s | %.1f ms/step | "
               "ETA %s\n",
               static_cast<long long>(e.step), static_cast<long long>(e.total_steps), e.loss, e.lr,
               e.grad_norm, e.tokens_per_s, e.step_seconds * 1e3, format_duration(eta).c_str());
  std::fflush(out_);
}

void ProgressLog::on_eval(const EvalEvent& e) {
  std::fprintf(out_, "eval step %lld | val_loss %.6f\n", static_cast<long long>(e.step),
               e.val_loss);
  std::fflush(out_);
}

void ProgressLog::on_checkpoint(const CheckpointEvent& e) {
  char signal[64] = "";
  if (e.signal_to_durable_seconds >= 0) {
    std::snprintf(signal, sizeof signal, " | signal to durable %.3f s",
                  e.signal_to_durable_seconds);
  }
  std::fprintf(out_, "checkpoint step %lld | %s | %.1f MB in %.3f s | stall %.1f ms | %s%s%s\n",
               static_cast<long long>(e.step), e.path.c_str(), static_cast<double>(e.bytes) / 1e6,
               e.seconds, e.stall_seconds * 1e3, e.reason.c_str(), e.async ? " (background)" : "",
               signal);
  std::fflush(out_);
}

}  // namespace railyard
