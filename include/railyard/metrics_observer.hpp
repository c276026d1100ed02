#pragma once
// The trainer's events as Prometheus metrics: a TrainObserver that keeps the latest values and
// rewrites a textfile-collector file from a background thread every interval, so checkpoint
// age and the heartbeat stay current even while one step or one save takes long.
// Metric names, labels and the per-rank file naming are documented in docs/metrics.md.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "railyard/memory_alert.hpp"
#include "railyard/nvml_probe.hpp"
#include "railyard/prometheus_textfile.hpp"
#include "railyard/train_observer.hpp"

namespace railyard {

struct MetricsOptions {
  std::string path;                 // --metrics-file; see metrics_file_for_rank
  double interval_seconds = 5.0;    // --metrics-interval, > 0
  double mem_alert_fraction = 0.9;  // --mem-alert, in (0, 1]
  int rank = 0;
  int world_size = 1;
  std::string nvml_library = "libnvidia-ml.so.1";
  bool recompute_possible = false;  // the alert may advise --recompute (see MemoryAlert)
};

// Rank r of a multi-rank run writes its own file, "metrics.prom" -> "metrics.rank3.prom"
// (ranks sharing a node must not overwrite each other; the collector reads every *.prom).
// A single-rank run writes `path` itself. Throws std::invalid_argument unless `path` ends in
// ".prom" (the only files node_exporter's textfile collector reads).
std::string metrics_file_for_rank(const std::string& path, int rank, int world_size);

class MetricsObserver : public TrainObserver {
 public:
  // Writes the file once at once (so a bad path fails at start-up, as std::runtime_error naming
  // it), then every interval. `warn` gets the memory-alert line; default: stderr.
  explicit MetricsObserver(MetricsOptions options,
                           std::function<void(const std::string&)> warn = nullptr);
  ~MetricsObserver() override;  // stops the thread and writes the final state
  MetricsObserver(const MetricsObserver&) = delete;
  MetricsObserver& operator=(const MetricsObserver&) = delete;

  void on_run(const RunEvent& event) override;
  void on_step(const StepEvent& event) override;
  void on_eval(const EvalEvent& event) override;
  void on_checkpoint(const CheckpointEvent& event) override;

  // Samples the probes and rewrites the file now.
  void write_now();
  const std::string& path() const { return path_; }

 private:
  void refresh_locked();  // probes, derived values, alert; holds mutex_
  void loop();

  MetricsOptions options_;
  std::string path_;
  std::function<void(const std::string&)> warn_;
  std::mutex mutex_;
  PrometheusTextfile metrics_;
  MemoryAlert alert_;
  NvmlProbe nvml_;
  int64_t step_ = 0;
  bool device_memory_from_engine_ = false;
  std::optional<double> last_checkpoint_time_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace railyard
