#include "railyard/metrics_observer.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "railyard/env.hpp"
#include "railyard/host_memory.hpp"

namespace railyard {
namespace {

constexpr auto kGauge = MetricType::kGauge;
constexpr auto kCounter = MetricType::kCounter;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

MetricLabels common_labels(int rank) {
  return {{"job_id", env_or("SLURM_JOB_ID", "none")},
          {"step_id", env_or("SLURM_STEP_ID", "none")},
          {"rank", std::to_string(rank)}};
}

struct MetricDefinition {
  const char* name;
  MetricType type;
  const char* help;
};

// Every metric this observer writes, once; docs/metrics.md lists the same.
constexpr MetricDefinition kMetrics[] = {
    {"railyard_running", kGauge, "1 while the trainer runs, 0 after it stopped"},
    {"railyard_world_size", kGauge, "Ranks in the run"},
    {"railyard_restarts", kGauge,
     "Times Slurm restarted this job (SLURM_RESTART_COUNT): requeues after preemption or time "
     "limit"},
    {"railyard_signals_received_total", kCounter,
     "Stop signals (preemption, time limit) this process received"},
    {"railyard_checkpoints_total", kCounter, "Checkpoints this process wrote"},
    {"railyard_memory_alert_threshold_ratio", kGauge,
     "The --mem-alert fraction of memory above which railyard_memory_alert is 1"},
    {"railyard_memory_alerts_total", kCounter,
     "Times used memory crossed the --mem-alert threshold"},
    {"railyard_last_update_timestamp_seconds", kGauge,
     "When this file was last written (unix seconds); stale means the trainer is gone"},
    {"railyard_last_checkpoint_age_seconds", kGauge,
     "Seconds since the last checkpoint became durable, as of the last update"},
    {"railyard_gpu_memory_used_bytes", kGauge, "Device memory in use, bytes"},
    {"railyard_gpu_memory_total_bytes", kGauge, "Device memory, bytes"},
    {"railyard_gpu_utilization_ratio", kGauge,
     "GPU busy fraction over NVML's last sample period (0..1)"},
    {"railyard_host_memory_rss_bytes", kGauge, "Resident memory of this rank, bytes"},
    {"railyard_host_memory_limit_bytes", kGauge,
     "Memory limit of this rank's cgroup (the job's --mem), else the node's RAM"},
    {"railyard_memory_alert", kGauge, "1 while used memory is above the --mem-alert threshold"},
    {"railyard_resumed_from_step", kGauge, "The checkpoint step this process resumed from"},
    {"railyard_step", kGauge, "Optimizer steps completed"},
    {"railyard_total_steps", kGauge, "Optimizer steps the run is configured for"},
    {"railyard_loss", kGauge, "Training loss of the last step (mean over ranks)"},
    {"railyard_learning_rate", kGauge, "Learning rate of the last step"},
    {"railyard_grad_norm", kGauge, "Gradient norm of the last step, before clipping"},
    {"railyard_step_seconds", kGauge, "Wall time of the last step, seconds"},
    {"railyard_tokens_per_second", kGauge,
     "Global training throughput of the last step, tokens per second"},
    {"railyard_tokens_seen", kGauge, "Global tokens trained on so far (restored on resume)"},
    {"railyard_last_step_timestamp_seconds", kGauge,
     "When the last step completed (unix seconds); stale while training is stuck"},
    {"railyard_val_loss", kGauge, "Validation loss of the last evaluation"},
    {"railyard_val_loss_step", kGauge, "Step of the last evaluation"},
    {"railyard_last_checkpoint_step", kGauge, "Step of the last durable checkpoint"},
    {"railyard_last_checkpoint_timestamp_seconds", kGauge,
     "When the last checkpoint became durable (unix seconds)"},
    {"railyard_last_checkpoint_duration_seconds", kGauge,
     "Seconds the last checkpoint took until durable"},
    {"railyard_last_checkpoint_stall_seconds", kGauge,
     "Training time the last checkpoint cost (the host snapshot for async saves)"},
    {"railyard_last_checkpoint_bytes", kGauge, "Size of the last checkpoint, bytes"},
};

void put(PrometheusTextfile& metrics, std::string_view name, double value) {
  for (const MetricDefinition& m : kMetrics) {
    if (name == m.name) {
      metrics.set(m.name, m.type, m.help, value);
      return;
    }
  }
  throw std::logic_error("metric " + std::string(name) + " is not in kMetrics");
}

void warn_stderr(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

std::string metrics_file_for_rank(const std::string& path, int rank, int world_size) {
  const std::string suffix = ".prom";
  if (path.size() <= suffix.size() || !path.ends_with(suffix) || path.ends_with("/" + suffix)) {
    throw std::invalid_argument("--metrics-file " + path +
                                ": the name must end in .prom (node_exporter's textfile "
                                "collector reads only *.prom files)");
  }
  if (world_size <= 1) return path;
  return path.substr(0, path.size() - suffix.size()) + ".rank" + std::to_string(rank) + suffix;
}

MetricsObserver::MetricsObserver(MetricsOptions options,
                                 std::function<void(const std::string&)> warn)
    : options_(std::move(options)),
      path_(metrics_file_for_rank(options_.path, options_.rank, options_.world_size)),
      warn_(warn ? std::move(warn) : warn_stderr),
      metrics_(common_labels(options_.rank)),
      alert_(options_.mem_alert_fraction, warn_, options_.recompute_possible),
      nvml_(nvml_device_from_environment(), options_.nvml_library) {
  if (!(options_.interval_seconds > 0)) {
    throw std::invalid_argument("--metrics-interval " + std::to_string(options_.interval_seconds) +
                                " must be a positive number of seconds");
  }
  const double restarts = std::strtod(env_or("SLURM_RESTART_COUNT", "0").c_str(), nullptr);
  put(metrics_, "railyard_running", 1);
  put(metrics_, "railyard_world_size", options_.world_size);
  put(metrics_, "railyard_restarts", restarts);
  put(metrics_, "railyard_signals_received_total", 0);
  put(metrics_, "railyard_checkpoints_total", 0);
  put(metrics_, "railyard_memory_alert_threshold_ratio", alert_.fraction());
  put(metrics_, "railyard_memory_alerts_total", 0);
  write_now();
  thread_ = std::thread([this] { loop(); });
}

MetricsObserver::~MetricsObserver() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    put(metrics_, "railyard_running", 0);
  }
  wake_.notify_all();
  thread_.join();
  try {
    write_now();
  } catch (const std::exception& e) {
    warn_(std::string("railyard: warning: final metrics write failed: ") + e.what());
  }
}

void MetricsObserver::loop() {
  bool warned = false;
  std::unique_lock lock(mutex_);
  const auto interval = std::chrono::duration<double>(options_.interval_seconds);
  while (!wake_.wait_for(lock, interval, [this] { return stopping_; })) {
    lock.unlock();
    try {
      write_now();
      warned = false;
    } catch (const std::exception& e) {
      // The run goes on without metrics; warn once per failure streak, not every interval.
      if (!warned) warn_(std::string("railyard: warning: ") + e.what());
      warned = true;
    }
    lock.lock();
  }
}

void MetricsObserver::refresh_locked() {
  const double now = unix_now();
  put(metrics_, "railyard_last_update_timestamp_seconds", now);
  if (last_checkpoint_time_) {
    put(metrics_, "railyard_last_checkpoint_age_seconds", now - *last_checkpoint_time_);
  }

  std::optional<std::pair<uint64_t, uint64_t>> gpu;  // used, total
  if (device_memory_from_engine_) {
    gpu = {static_cast<uint64_t>(metrics_.value("railyard_gpu_memory_used_bytes")),
           static_cast<uint64_t>(metrics_.value("railyard_gpu_memory_total_bytes"))};
  }
  if (const auto reading = nvml_.read()) {
    if (!device_memory_from_engine_) {
      gpu = {reading->mem_used, reading->mem_total};
      put(metrics_, "railyard_gpu_memory_used_bytes", reading->mem_used);
      put(metrics_, "railyard_gpu_memory_total_bytes", reading->mem_total);
    }
    if (reading->utilization) {
      put(metrics_, "railyard_gpu_utilization_ratio", *reading->utilization);
    }
  }

  const auto host = read_host_memory();
  if (host) {
    put(metrics_, "railyard_host_memory_rss_bytes", host->rss);
    put(metrics_, "railyard_host_memory_limit_bytes", host->limit);
  }
  // The alert watches the GPU where there is one, else host memory against the job's limit.
  if (gpu) {
    alert_.update(gpu->first, gpu->second, step_, "GPU " + nvml_device_from_environment());
  } else if (host) {
    alert_.update(host->rss, host->limit, step_, "host");
  }
  put(metrics_, "railyard_memory_alert", alert_.above() ? 1 : 0);
  put(metrics_, "railyard_memory_alerts_total", static_cast<double>(alert_.crossings()));
}

void MetricsObserver::write_now() {
  std::lock_guard lock(mutex_);
  refresh_locked();
  metrics_.write(path_);
}

void MetricsObserver::on_run(const RunEvent& event) {
  {
    std::lock_guard lock(mutex_);
    if (event.kind == "signal") {
      put(metrics_, "railyard_signals_received_total",
          metrics_.value("railyard_signals_received_total") + 1);
    }
    const bool ended = event.kind == "stop" || event.kind == "finish";
    put(metrics_, "railyard_running", ended ? 0 : 1);
    if (event.kind == "resume") {
      put(metrics_, "railyard_resumed_from_step", static_cast<double>(event.step));
    }
  }
  write_now();
}

void MetricsObserver::on_step(const StepEvent& e) {
  std::lock_guard lock(mutex_);
  step_ = e.step;
  put(metrics_, "railyard_step", static_cast<double>(e.step));
  put(metrics_, "railyard_total_steps", static_cast<double>(e.total_steps));
  put(metrics_, "railyard_loss", e.loss);
  put(metrics_, "railyard_learning_rate", e.lr);
  put(metrics_, "railyard_grad_norm", e.grad_norm);
  put(metrics_, "railyard_step_seconds", e.step_seconds);
  put(metrics_, "railyard_tokens_per_second", e.tokens_per_s);
  put(metrics_, "railyard_tokens_seen", static_cast<double>(e.tokens_seen));
  put(metrics_, "railyard_last_step_timestamp_seconds", unix_now());
  if (e.device_mem_total > 0) {
    device_memory_from_engine_ = true;
    put(metrics_, "railyard_gpu_memory_used_bytes", static_cast<double>(e.device_mem_used));
    put(metrics_, "railyard_gpu_memory_total_bytes", static_cast<double>(e.device_mem_total));
    alert_.update(e.device_mem_used, e.device_mem_total, e.step,
                  "GPU " + nvml_device_from_environment());
  }
}

void MetricsObserver::on_eval(const EvalEvent& e) {
  std::lock_guard lock(mutex_);
  put(metrics_, "railyard_val_loss", e.val_loss);
  put(metrics_, "railyard_val_loss_step", static_cast<double>(e.step));
}

void MetricsObserver::on_checkpoint(const CheckpointEvent& e) {
  {
    std::lock_guard lock(mutex_);
    last_checkpoint_time_ = unix_now();
    put(metrics_, "railyard_checkpoints_total", metrics_.value("railyard_checkpoints_total") + 1);
    put(metrics_, "railyard_last_checkpoint_step", static_cast<double>(e.step));
    put(metrics_, "railyard_last_checkpoint_timestamp_seconds", *last_checkpoint_time_);
    put(metrics_, "railyard_last_checkpoint_duration_seconds", e.seconds);
    put(metrics_, "railyard_last_checkpoint_stall_seconds", e.stall_seconds);
    put(metrics_, "railyard_last_checkpoint_bytes", static_cast<double>(e.bytes));
  }
  write_now();
}

}  // namespace railyard
