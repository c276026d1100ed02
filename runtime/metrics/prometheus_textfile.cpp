#include "railyard/prometheus_textfile.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace railyard {
namespace {

bool valid_name(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

void append_labels(std::string& out, const MetricLabels& common, const MetricLabels& own) {
  if (common.empty() && own.empty()) return;
  out += '{';
  bool first = true;
  for (const MetricLabels* list : {&common, &own}) {
    for (const auto& [key, value] : *list) {
      if (!first) out += ',';
      first = false;
      out += key;
      out += "=\"";
      out += escape_label_value(value);
      out += '"';
    }
  }
  out += '}';
}

void check_labels(const MetricLabels& labels) {
  for (const auto& [key, value] : labels) {
    if (!valid_name(key, false) || key.starts_with("__")) {
      throw std::invalid_argument("invalid Prometheus label name '" + key +
                                  "' (allowed: [a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
    }
  }
}

// HELP text escapes backslash and newline only.
std::string escape_help(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot write metrics file " + path + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

PrometheusTextfile::PrometheusTextfile(MetricLabels common) : common_(std::move(common)) {
  check_labels(common_);
}

void PrometheusTextfile::set(const std::string& name, MetricType type, const std::string& help,
                             double value, const MetricLabels& labels) {
  auto family = std::find_if(families_.begin(), families_.end(),
                             [&](const Family& f) { return f.name == name; });
  if (family == families_.end()) {
    if (!valid_name(name, true)) {
      throw std::invalid_argument("invalid Prometheus metric name '" + name +
                                  "' (allowed: [a-zA-Z_:][a-zA-Z0-9_:]*)");
    }
    check_labels(labels);
    families_.push_back(Family{name, help, type, {}});
    family = families_.end() - 1;
  } else if (family->type != type) {
    throw std::invalid_argument("Prometheus metric '" + name + "' set as both gauge and counter");
  }
  for (Sample& sample : family->samples) {
    if (sample.labels == labels) {
      sample.value = value;
      return;
    }
  }
  check_labels(labels);
  family->samples.push_back(Sample{labels, value});
}

void PrometheusTextfile::erase(const std::string& name) {
  std::erase_if(families_, [&](const Family& f) { return f.name == name; });
}

bool PrometheusTextfile::has(const std::string& name) const {
  return std::any_of(families_.begin(), families_.end(),
                     [&](const Family& f) { return f.name == name; });
}

double PrometheusTextfile::value(const std::string& name, const MetricLabels& labels) const {
  for (const Family& family : families_) {
    if (family.name != name) continue;
    for (const Sample& sample : family.samples) {
      if (sample.labels == labels) return sample.value;
    }
  }
  throw std::out_of_range("no Prometheus sample " + name + " with those labels");
}

std::string PrometheusTextfile::render() const {
  std::string out;
  for (const Family& family : families_) {
    out += "# HELP " + family.name + ' ' + escape_help(family.help) + '\n';
    out +=
        "# TYPE " + family.name + (family.type == MetricType::kGauge ? " gauge\n" : " counter\n");
    for (const Sample& sample : family.samples) {
      out += family.name;
      append_labels(out, common_, sample.labels);
      out += ' ';
      out += format_value(sample.value);
      out += '\n';
    }
  }
  return out;
}

void PrometheusTextfile::write(const std::string& path) const {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string temp = dir + "." + base + "." + std::to_string(::getpid()) + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error("cannot create metrics file " + temp + " (for --metrics-file " + path +
                             "): " + std::strerror(errno));
  }
  try {
    write_all(fd, render(), temp);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  // No fsync: after a crash a stale or empty metrics file is harmless, and the collector only
  // needs rename's atomicity.
  if (::close(fd) != 0 || ::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    throw std::runtime_error("cannot replace metrics file " + path + ": " + std::strerror(error));
  }
}

}  // namespace railyard
