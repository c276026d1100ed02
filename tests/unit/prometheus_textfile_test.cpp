#include "railyard/prometheus_textfile.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace railyard {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PrometheusTextfile, RendersHelpTypeAndLabelledSamples) {
  PrometheusTextfile m({{"job_id", "42"}, {"rank", "3"}});
  m.set("railyard_loss", MetricType::kGauge, "Training loss", 2.5);
  m.set("railyard_signals_total", MetricType::kCounter, "Signals", 1, {{"signal", "USR1"}});
  m.set("railyard_signals_total", MetricType::kCounter, "Signals", 2, {{"signal", "TERM"}});
  EXPECT_EQ(m.render(),
            "# HELP railyard_loss Training loss\n"
            "# TYPE railyard_loss gauge\n"
            "railyard_loss{job_id=\"42\",rank=\"3\"} 2.5\n"
            "# HELP railyard_signals_total Signals\n"
            "# TYPE railyard_signals_total counter\n"
            "railyard_signals_total{job_id=\"42\",rank=\"3\",signal=\"USR1\"} 1\n"
            "railyard_signals_total{job_id=\"42\",rank=\"3\",signal=\"TERM\"} 2\n");
}

TEST(PrometheusTextfile, SetReplacesTheSampleWithTheSameLabels) {
  PrometheusTextfile m;
  m.set("a", MetricType::kGauge, "h", 1);
  m.set("a", MetricType::kGauge, "h", 7);
  EXPECT_EQ(m.value("a"), 7);
  EXPECT_EQ(m.render(), "# HELP a h\n# TYPE a gauge\na 7\n");
  m.erase("a");
  EXPECT_FALSE(m.has("a"));
  EXPECT_EQ(m.render(), "");
  EXPECT_THROW(m.value("a"), std::out_of_range);
}

TEST(PrometheusTextfile, FormatsSpecialValuesAndLargeIntegersExactly) {
  PrometheusTextfile m;
  m.set("nan", MetricType::kGauge, "h", std::nan(""));
  m.set("inf", MetricType::kGauge, "h", HUGE_VAL);
  m.set("bytes", MetricType::kGauge, "h", 150994944000.0);
  m.set("small", MetricType::kGauge, "h", 0.125);
  const std::string text = m.render();
  EXPECT_NE(text.find("\nnan NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ninf +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nbytes 150994944000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nsmall 0.125\n"), std::string::npos) << text;
}

TEST(PrometheusTextfile, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  PrometheusTextfile m(MetricLabels{{"host", "x\"y"}});
  m.set("m", MetricType::kGauge, "line one\nline two \\", 1);
  EXPECT_EQ(m.render(),
            "# HELP m line one\\nline two \\\\\n# TYPE m gauge\nm{host=\"x\\\"y\"} 1\n");
}

TEST(PrometheusTextfile, RejectsBadNamesAndTypeChanges) {
  PrometheusTextfile m;
  EXPECT_THROW(m.set("1abc", MetricType::kGauge, "h", 1), std::invalid_argument);
  EXPECT_THROW(m.set("a-b", MetricType::kGauge, "h", 1), std::invalid_argument);
  EXPECT_THROW(m.set("ok", MetricType::kGauge, "h", 1, {{"bad-label", "v"}}),
               std::invalid_argument);
  EXPECT_THROW(m.set("ok2", MetricType::kGauge, "h", 1, {{"__reserved", "v"}}),
               std::invalid_argument);
  EXPECT_THROW(PrometheusTextfile(MetricLabels{{"a:b", "v"}}), std::invalid_argument);
  m.set("ns:metric_1", MetricType::kGauge, "h", 1);
  EXPECT_THROW(m.set("ns:metric_1", MetricType::kCounter, "h", 1), std::invalid_argument);
}

TEST(PrometheusTextfile, WriteReplacesTheFileAndLeavesNoTemporary) {
  const fs::path dir = fs::temp_directory_path() / ("prom_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / "run.prom";
  PrometheusTextfile m;
  m.set("a", MetricType::kGauge, "h", 1);
  m.write(path);
  EXPECT_EQ(read_file(path), m.render());
  m.set("a", MetricType::kGauge, "h", 2);
  m.write(path);
  EXPECT_EQ(read_file(path), "# HELP a h\n# TYPE a gauge\na 2\n");
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "run.prom");
    ++files;
  }
  EXPECT_EQ(files, 1);
  fs::remove_all(dir);
}

TEST(PrometheusTextfile, WriteIntoAMissingDirectoryNamesThePath) {
  PrometheusTextfile m;
  try {
    m.write("/nonexistent-railyard-dir/run.prom");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-railyard-dir/run.prom"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace railyard
