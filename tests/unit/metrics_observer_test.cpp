#include "railyard/metrics_observer.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

namespace railyard {
namespace {

namespace fs = std::filesystem;

// name{labels} -> value, from a textfile-collector file.
std::map<std::string, double> parse(const fs::path& path) {
  std::ifstream in(path);
  std::map<std::string, double> samples;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

std::string key(const std::string& name) {
  return name + "{job_id=\"4242\",step_id=\"7\",rank=\"1\"}";
}

class MetricsObserverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("metrics_observer_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ::setenv("SLURM_JOB_ID", "4242", 1);
    ::setenv("SLURM_STEP_ID", "7", 1);
    ::setenv("SLURM_RESTART_COUNT", "2", 1);
  }
  void TearDown() override {
    fs::remove_all(dir_);
    ::unsetenv("SLURM_JOB_ID");
    ::unsetenv("SLURM_STEP_ID");
    ::unsetenv("SLURM_RESTART_COUNT");
  }
  MetricsOptions options(double interval = 60) {
    MetricsOptions o;
    o.path = (dir_ / "run.prom").string();
    o.interval_seconds = interval;
    o.rank = 1;
    o.world_size = 2;
    o.nvml_library = "libnvidia-ml-absent-for-test.so.1";
    return o;
  }
  fs::path dir_;
  std::vector<std::string> warnings_;
  std::function<void(const std::string&)> warn_ = [this](const std::string& l) {
    warnings_.push_back(l);
  };
};

TEST(MetricsFileForRank, InsertsTheRankBeforeTheSuffixForMultiRankRuns) {
  EXPECT_EQ(metrics_file_for_rank("/var/lib/prom/job.prom", 3, 8), "/var/lib/prom/job.rank3.prom");
  EXPECT_EQ(metrics_file_for_rank("/var/lib/prom/job.prom", 0, 1), "/var/lib/prom/job.prom");
  for (const char* bad : {"job.txt", ".prom", "dir/.prom", "job"}) {
    try {
      metrics_file_for_rank(bad, 0, 1);
      FAIL() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--metrics-file"), std::string::npos) << e.what();
    }
  }
}

TEST_F(MetricsObserverTest, WritesAtStartWithLabelsRestartsAndNoGpuMetricsWithoutNvml) {
  MetricsObserver observer(options(), warn_);
  EXPECT_EQ(observer.path(), (dir_ / "run.rank1.prom").string());
  auto m = parse(observer.path());
  EXPECT_EQ(m.at(key("railyard_running")), 1);
  EXPECT_EQ(m.at(key("railyard_restarts")), 2);
  EXPECT_EQ(m.at(key("railyard_world_size")), 2);
  EXPECT_EQ(m.at(key("railyard_signals_received_total")), 0);
  EXPECT_GT(m.at(key("railyard_host_memory_rss_bytes")), 0);
  EXPECT_EQ(m.count(key("railyard_gpu_utilization_ratio")), 0u);
  EXPECT_EQ(m.count(key("railyard_gpu_memory_used_bytes")), 0u);
  EXPECT_EQ(m.count(key("railyard_step")), 0u);
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(MetricsObserverTest, StepCheckpointAndRunEventsMoveTheValues) {
  MetricsObserver observer(options(), warn_);
  StepEvent step;
  step.step = 10;
  step.total_steps = 100;
  step.loss = 3.25;
  step.tokens_per_s = 1000;
  step.step_seconds = 0.5;
  step.tokens_seen = 5120;
  observer.on_step(step);
  observer.write_now();
  auto m = parse(observer.path());
  EXPECT_EQ(m.at(key("railyard_step")), 10);
  EXPECT_EQ(m.at(key("railyard_loss")), 3.25);
  EXPECT_EQ(m.at(key("railyard_tokens_per_second")), 1000);
  EXPECT_EQ(m.at(key("railyard_step_seconds")), 0.5);
  EXPECT_EQ(m.count(key("railyard_last_checkpoint_age_seconds")), 0u);

  step.step = 11;
  step.loss = 3.0;
  observer.on_step(step);
  CheckpointEvent ckpt;
  ckpt.step = 11;
  ckpt.bytes = 123456789;
  ckpt.seconds = 1.5;
  ckpt.stall_seconds = 0.02;
  observer.on_checkpoint(ckpt);  // writes at once
  m = parse(observer.path());
  EXPECT_EQ(m.at(key("railyard_step")), 11);
  EXPECT_EQ(m.at(key("railyard_loss")), 3.0);
  EXPECT_EQ(m.at(key("railyard_checkpoints_total")), 1);
  EXPECT_EQ(m.at(key("railyard_last_checkpoint_step")), 11);
  EXPECT_EQ(m.at(key("railyard_last_checkpoint_bytes")), 123456789);
  EXPECT_EQ(m.at(key("railyard_last_checkpoint_duration_seconds")), 1.5);
  EXPECT_GE(m.at(key("railyard_last_checkpoint_age_seconds")), 0);
  EXPECT_LT(m.at(key("railyard_last_checkpoint_age_seconds")), 5);
  EXPECT_EQ(m.count(key("railyard_signal_to_durable_seconds")), 0u);  // a periodic save
  ckpt.reason = "signal";
  ckpt.signal_to_durable_seconds = 2.25;
  observer.on_checkpoint(ckpt);
  EXPECT_EQ(parse(observer.path()).at(key("railyard_signal_to_durable_seconds")), 2.25);

  observer.on_run(RunEvent{"signal", 11, "USR1"});
  observer.on_run(RunEvent{"signal", 11, "TERM"});
  m = parse(observer.path());
  EXPECT_EQ(m.at(key("railyard_signals_received_total")), 2);
  EXPECT_EQ(m.at(key("railyard_running")), 1);
  observer.on_run(RunEvent{"stop", 11, "saved"});
  EXPECT_EQ(parse(observer.path()).at(key("railyard_running")), 0);
}

TEST_F(MetricsObserverTest, DeviceMemoryFromTheEngineDrivesTheAlert) {
  auto o = options();
  o.mem_alert_fraction = 0.5;
  MetricsObserver observer(o, warn_);
  StepEvent step;
  step.step = 3;
  step.device_mem_used = 40;
  step.device_mem_total = 100;
  observer.on_step(step);
  observer.write_now();
  auto m = parse(observer.path());
  EXPECT_EQ(m.at(key("railyard_gpu_memory_used_bytes")), 40);
  EXPECT_EQ(m.at(key("railyard_gpu_memory_total_bytes")), 100);
  EXPECT_EQ(m.at(key("railyard_memory_alert")), 0);
  EXPECT_TRUE(warnings_.empty());

  step.step = 4;
  step.device_mem_used = 75;
  observer.on_step(step);
  observer.write_now();
  m = parse(observer.path());
  EXPECT_EQ(m.at(key("railyard_memory_alert")), 1);
  EXPECT_EQ(m.at(key("railyard_memory_alerts_total")), 1);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("memory 75.0% used"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("at step 4"), std::string::npos) << warnings_[0];
}

TEST_F(MetricsObserverTest, WithoutAGpuTheAlertWatchesHostMemory) {
  auto o = options();
  o.mem_alert_fraction = 1e-9;  // any resident process is above this
  MetricsObserver observer(o, warn_);
  auto m = parse(observer.path());
  EXPECT_EQ(m.at(key("railyard_memory_alert")), 1);
  EXPECT_EQ(m.at(key("railyard_memory_alert_threshold_ratio")), 1e-9);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("host memory"), std::string::npos) << warnings_[0];
}

TEST_F(MetricsObserverTest, TheBackgroundThreadRewritesEveryIntervalAndTheEndSaysStopped) {
  std::string path;
  double first = 0;
  {
    MetricsObserver observer(options(0.05), warn_);
    path = observer.path();
    first = parse(path).at(key("railyard_last_update_timestamp_seconds"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_GT(parse(path).at(key("railyard_last_update_timestamp_seconds")), first);
    EXPECT_EQ(parse(path).at(key("railyard_running")), 1);
  }
  EXPECT_EQ(parse(path).at(key("railyard_running")), 0);
}

TEST_F(MetricsObserverTest, BadOptionsNameTheOption) {
  auto o = options();
  o.interval_seconds = 0;
  EXPECT_THROW(MetricsObserver(o, warn_), std::invalid_argument);
  o = options();
  o.mem_alert_fraction = 2;
  EXPECT_THROW(MetricsObserver(o, warn_), std::invalid_argument);
  o = options();
  o.path = "/nonexistent-railyard-dir/run.prom";
  try {
    MetricsObserver observer(o, warn_);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-railyard-dir/run.rank1.prom"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace railyard
