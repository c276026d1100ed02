#include "railyard/json_log.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace railyard {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

nlohmann::json head(const char* type) {
  return {{"type", type}, {"time", unix_now()}};
}

}  // namespace

JsonLog::JsonLog(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "a");
  if (f_ == nullptr) {
    throw std::runtime_error("--log-json: cannot open '" + path +
                             "' for appending: " + std::strerror(errno));
  }
}

JsonLog::~JsonLog() {
  if (f_ != nullptr) std::fclose(f_);
}

void JsonLog::write(const std::string& line) {
  // A full disk must not end the training; the progress log still reports.
  if (std::fputs(line.c_str(), f_) < 0 || std::fputc('\n', f_) == EOF || std::fflush(f_) != 0) {
    std::fprintf(stderr, "railyard: warning: writing --log-json '%s' failed: %s\n", path_.c_str(),
                 std::strerror(errno));
  }
}

void JsonLog::on_run(const RunEvent& e) {
  nlohmann::json j = head("run");
  j["kind"] = e.kind;
  j["step"] = e.step;
  j["detail"] = e.detail;
  write(j.dump());
}

void JsonLog::on_step(const StepEvent& e) {
  nlohmann::json j = head("step");
  j["step"] = e.step;
  j["total_steps"] = e.total_steps;
  j["loss"] = e.loss;  // nlohmann writes the shortest text that reads back to the same double
  j["lr"] = e.lr;
  j["grad_norm"] = e.grad_norm;
  j["step_seconds"] = e.step_seconds;
  j["step_ms"] = e.step_seconds * 1e3;
  j["tokens_per_s"] = e.tokens_per_s;
  j["tokens_seen"] = e.tokens_seen;
  j["device_mem_used"] = e.device_mem_used;
  j["device_mem_total"] = e.device_mem_total;
  write(j.dump());
}

void JsonLog::on_eval(const EvalEvent& e) {
  nlohmann::json j = head("eval");
  j["step"] = e.step;
  j["val_loss"] = e.val_loss;
  write(j.dump());
}

void JsonLog::on_checkpoint(const CheckpointEvent& e) {
  nlohmann::json j = head("checkpoint");
  j["step"] = e.step;
  j["path"] = e.path;
  j["bytes"] = e.bytes;
  j["seconds"] = e.seconds;
  j["stall_seconds"] = e.stall_seconds;
  j["async"] = e.async;
  j["reason"] = e.reason;
  if (e.signal_to_durable_seconds >= 0)
    j["signal_to_durable_seconds"] = e.signal_to_durable_seconds;
  write(j.dump());
}

}  // namespace railyard
