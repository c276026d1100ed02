#pragma once
// Metrics in Prometheus' text exposition format as node_exporter's textfile collector reads
// them (gauges and counters, no timestamps), written atomically so that the collector never
// reads half a file.

#include <string>
#include <utility>
#include <vector>

namespace railyard {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kGauge, kCounter };

class PrometheusTextfile {
 public:
  // `common` labels (job id, step id, rank) are put on every sample, before the sample's own.
  explicit PrometheusTextfile(MetricLabels common = {});

  // Sets one sample of family `name`, declaring the family on first use. Families render in
  // the order first set. Throws std::invalid_argument for a name or label name outside
  // Prometheus' grammar, or for a family re-declared with another type.
  void set(const std::string& name, MetricType type, const std::string& help, double value,
           const MetricLabels& labels = {});
  // Drops a family (a reading that is no longer available).
  void erase(const std::string& name);
  bool has(const std::string& name) const;
  // The value of the family's sample with exactly these extra labels; throws std::out_of_range.
  double value(const std::string& name, const MetricLabels& labels = {}) const;

  std::string render() const;
  // Writes render() to a temporary file next to `path` ("." prefix, no ".prom" suffix, so the
  // collector ignores it), then renames it over `path`. Throws std::runtime_error naming the
  // path and the system error.
  void write(const std::string& path) const;

 private:
  struct Sample {
    MetricLabels labels;
    double value;
  };
  struct Family {
    std::string name, help;
    MetricType type;
    std::vector<Sample> samples;
  };
  MetricLabels common_;
  std::vector<Family> families_;
};

// A label value escaped as the exposition format requires (backslash, double quote, newline).
std::string escape_label_value(const std::string& value);

}  // namespace railyard
