// The documented formats of the progress line and the JSON-lines log (docs/training.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "railyard/json_log.hpp"
#include "railyard/progress_log.hpp"

namespace railyard {
namespace {

std::string lines_of(void (*body)(ProgressLog&)) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  {
    ProgressLog log(f, 10);
    body(log);
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

StepEvent step(int64_t n) {
  StepEvent e;
  e.step = n;
  e.total_steps = 100;
  e.loss = 2.3456789;
  e.lr = 6e-4;
  e.grad_norm = 0.8125;
  e.step_seconds = 0.0993;
  e.tokens_per_s = 41230.4;
  return e;
}

TEST(ProgressLog, LinesHaveTheDocumentedFormat) {
  std::string out = lines_of([](ProgressLog& log) {
    log.on_run(RunEvent{"resume", 120, "from /c/ckpt-00000120.h5"});
    for (int64_t s = 1; s <= 20; ++s) log.on_step(step(s));
    log.on_eval(EvalEvent{20, 2.401234});
    log.on_checkpoint(
        CheckpointEvent{20, "/c/ckpt-00000020.h5", 12300000, 0.081, 0.0021, true, "periodic"});
  });
  EXPECT_EQ(out,
            "run resume | step 120 | from /c/ckpt-00000120.h5\n"
            "step 10/100 | loss 2.345679 | lr 6.00e-04 | norm 0.812 | 41230 tok/s | 99.3 ms/step "
            "| ETA 9s\n"
            "step 20/100 | loss 2.345679 | lr 6.00e-04 | norm 0.812 | 41230 tok/s | 99.3 ms/step "
            "| ETA 8s\n"
            "eval step 20 | val_loss 2.401234\n"
            "checkpoint step 20 | /c/ckpt-00000020.h5 | 12.3 MB in 0.081 s | stall 2.1 ms | "
            "periodic (background)\n");
}

TEST(ProgressLog, LastStepIsAlwaysPrintedAndDurationsRead) {
  std::string out = lines_of([](ProgressLog& log) {
    StepEvent e = step(7);
    e.total_steps = 7;
    log.on_step(e);
  });
  EXPECT_NE(out.find("step 7/7 |"), std::string::npos) << out;
  EXPECT_EQ(format_duration(5.4), "5s");
  EXPECT_EQ(format_duration(245), "4m05s");
  EXPECT_EQ(format_duration(3723), "1h02m03s");
}

TEST(JsonLog, OneObjectPerLineAndLossesRoundTrip) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("railyard_json_log_" + std::to_string(getpid()) + ".jsonl"))
                               .string();
  std::filesystem::remove(path);
  const float loss = 1.0f / 3.0f;  // not exact in decimal: needs 9 significant digits
  {
    JsonLog log(path);
    StepEvent e = step(3);
    e.loss = loss;
    log.on_step(e);
    log.on_run(RunEvent{"signal", 3, "exit | SIGTERM on rank 0"});
    log.on_checkpoint(CheckpointEvent{3, "/c/x.h5", 10, 0.5, 0.01, false, "signal"});
    log.on_eval(EvalEvent{3, 2.5});
  }
  {
    JsonLog again(path);  // appends
    again.on_run(RunEvent{"finish", 4, ""});
  }
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> rec;
  while (std::getline(in, line)) rec.push_back(nlohmann::json::parse(line));
  std::filesystem::remove(path);
  ASSERT_EQ(rec.size(), 5u);
  EXPECT_EQ(rec[0]["type"], "step");
  EXPECT_EQ(static_cast<float>(rec[0]["loss"].get<double>()), loss);
  EXPECT_EQ(rec[0]["step"], 3);
  EXPECT_DOUBLE_EQ(rec[0]["step_ms"].get<double>(), 99.3);
  for (const char* k : {"time", "total_steps", "lr", "grad_norm", "step_seconds", "tokens_per_s",
                        "tokens_seen", "device_mem_used", "device_mem_total"}) {
    EXPECT_TRUE(rec[0].contains(k)) << k;
  }
  EXPECT_EQ(rec[1]["kind"], "signal");
  EXPECT_EQ(rec[2]["reason"], "signal");
  EXPECT_EQ(rec[2]["async"], false);
  EXPECT_EQ(rec[3]["val_loss"], 2.5);
  EXPECT_EQ(rec[4]["kind"], "finish");
  EXPECT_THROW(JsonLog("/nonexistent-dir/x.jsonl"), std::runtime_error);
}

}  // namespace
}  // namespace railyard
