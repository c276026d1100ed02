#include "railyard/run_log.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

namespace railyard {
namespace {

using nlohmann::json;

struct LineReader {
  const json& object;
  std::string where;

  [[noreturn]] void fail(const std::string& what) const { throw RunLogError(where + ": " + what); }

  const json* find(const char* field) const {
    const auto it = object.find(field);
    return it == object.end() ? nullptr : &*it;
  }
  int64_t integer(const char* field) const {
    const json* value = find(field);
    if (value == nullptr) fail(std::string("missing field \"") + field + "\"");
    if (!value->is_number_integer())
      fail(std::string("field \"") + field + "\" must be an integer");
    return value->get<int64_t>();
  }
  // null reads as NaN: JSON has no NaN, and a diverged loss is logged as null.
  double number(const char* field, bool required) const {
    const json* value = find(field);
    if (value == nullptr) {
      if (required) fail(std::string("missing field \"") + field + "\"");
      return 0;
    }
    if (value->is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!value->is_number()) fail(std::string("field \"") + field + "\" must be a number");
    return value->get<double>();
  }
  std::string text(const char* field, bool required) const {
    const json* value = find(field);
    if (value == nullptr) {
      if (required) fail(std::string("missing field \"") + field + "\"");
      return "";
    }
    if (!value->is_string()) fail(std::string("field \"") + field + "\" must be a string");
    return value->get<std::string>();
  }
};

void start_segment(RunLog& log, const std::string& kind, int64_t resumed_from,
                   const std::string& origin) {
  // A start/resume right at the top of a file names the file's segment instead of opening
  // an empty one.
  if (!log.segments.empty() && log.segments.back().steps.empty() &&
      log.segments.back().kind == "continued") {
    log.segments.back().kind = kind;
    log.segments.back().resumed_from = resumed_from;
    log.segments.back().origin = origin;
    return;
  }
  log.segments.push_back(RunLogSegment{origin, kind, resumed_from, {}});
}

std::string checkpoint_detail(const LineReader& line) {
  std::string detail = line.text("reason", false);
  const double bytes = line.number("bytes", false);
  const double seconds = line.number("seconds", false);
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "%s%.1f MB in %.2f s", detail.empty() ? "" : ", ",
                bytes / 1e6, seconds);
  return detail + buffer;
}

}  // namespace

const char* mark_kind_name(RunMarkKind kind) {
  switch (kind) {
    case RunMarkKind::kCheckpoint:
      return "checkpoint";
    case RunMarkKind::kSignal:
      return "signal";
    case RunMarkKind::kRequeue:
      return "requeue";
    case RunMarkKind::kResume:
      return "resume";
    case RunMarkKind::kStart:
      return "start";
    case RunMarkKind::kStop:
      return "stop";
    case RunMarkKind::kFinish:
      return "finish";
  }
  return "?";
}

void append_run_log(RunLog& log, std::istream& in, const std::string& name) {
  log.files.push_back(name);
  log.segments.push_back(RunLogSegment{name + ":1", "continued", 0, {}});
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    const std::string where = name + ":" + std::to_string(number);
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    json object;
    try {
      object = json::parse(text);
    } catch (const json::parse_error& e) {
      throw RunLogError(where + ": not JSON (" + e.what() + ")");
    }
    if (!object.is_object()) throw RunLogError(where + ": expected a JSON object per line");
    const LineReader line{object, where};
    const std::string type = line.text("type", true);
    const double time = line.number("time", false);
    if (type == "step") {
      RunLogStep step;
      step.step = line.integer("step");
      step.time = time;
      step.loss = line.number("loss", true);
      step.tokens_per_s = line.number("tokens_per_s", true);
      step.step_seconds = line.number("step_seconds", false);
      log.segments.back().steps.push_back(step);
    } else if (type == "eval") {
      log.evals.push_back(
          RunLogEval{line.integer("step"), line.number("val_loss", true), log.segments.size() - 1});
    } else if (type == "checkpoint") {
      log.marks.push_back(RunLogMark{RunMarkKind::kCheckpoint, line.integer("step"), time,
                                     checkpoint_detail(line), log.segments.size() - 1});
    } else if (type == "run") {
      const std::string kind = line.text("kind", true);
      const int64_t step = line.integer("step");
      const std::string detail = line.text("detail", false);
      if (kind == "start" || kind == "resume") start_segment(log, kind, step, where);
      static const std::pair<const char*, RunMarkKind> kinds[] = {
          {"start", RunMarkKind::kStart},   {"resume", RunMarkKind::kResume},
          {"signal", RunMarkKind::kSignal}, {"requeue", RunMarkKind::kRequeue},
          {"stop", RunMarkKind::kStop},     {"finish", RunMarkKind::kFinish}};
      const auto known = std::find_if(std::begin(kinds), std::end(kinds),
                                      [&](const auto& k) { return kind == k.first; });
      // Other kinds ("launch", "bind", ...) describe the set-up, not the run's course.
      if (known == std::end(kinds)) continue;
      const RunMarkKind mark = known->second;
      log.marks.push_back(RunLogMark{mark, step, time, detail, log.segments.size() - 1});
    }
  }
  if (in.bad()) throw RunLogError(name + ": read error");
}

namespace {

std::string file_of(const std::string& origin) {
  return origin.substr(0, origin.rfind(':'));
}

// The names without what they all share at the front (up to a '/') and at the end (from a '/').
void shorten(std::vector<std::string>& names) {
  if (names.size() < 2) return;
  size_t front = 0, back = 0;
  const std::string& a = names.front();
  const auto shared = [&](auto at) {
    return std::all_of(names.begin(), names.end(), [&](const std::string& n) { return at(n); });
  };
  for (size_t i = 0;
       i < a.size() && shared([&](const std::string& n) { return i < n.size() && n[i] == a[i]; });
       ++i) {
    if (a[i] == '/') front = i + 1;
  }
  for (size_t i = 1; i <= a.size() && shared([&](const std::string& n) {
                       return i <= n.size() && n[n.size() - i] == a[a.size() - i];
                     });
       ++i) {
    if (a[a.size() - i] == '/') back = i;
  }
  for (std::string& n : names) {
    if (front + back < n.size()) n = n.substr(front, n.size() - front - back);
  }
}

}  // namespace

std::vector<RunLogRun> group_runs(const RunLog& log) {
  std::vector<RunLogRun> runs;
  std::vector<bool> requeued(log.segments.size(), false);
  for (const RunLogMark& m : log.marks) {
    if (m.kind == RunMarkKind::kRequeue && m.segment < requeued.size()) requeued[m.segment] = true;
  }
  for (size_t i = 0; i < log.segments.size(); ++i) {
    const bool fresh = log.segments[i].kind == "start" && !(i > 0 && requeued[i - 1]);
    if (runs.empty() || fresh) runs.push_back(RunLogRun{file_of(log.segments[i].origin), {}});
    runs.back().segments.push_back(i);
  }
  std::vector<std::string> names;
  for (const RunLogRun& r : runs) names.push_back(r.name);
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto same_file = std::count(names.begin(), names.end(), runs[i].name);
    if (same_file > 1) {
      const auto k = std::count(names.begin(), names.begin() + static_cast<long>(i), names[i]);
      runs[i].name += " #" + std::to_string(k + 1);
    }
  }
  names.clear();
  for (const RunLogRun& r : runs) names.push_back(r.name);
  shorten(names);
  for (size_t i = 0; i < runs.size(); ++i) runs[i].name = names[i];
  return runs;
}

RunLog read_run_logs(const std::vector<std::string>& paths) {
  RunLog log;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in) throw RunLogError(path + ": cannot open the run log");
    append_run_log(log, in, path);
  }
  return log;
}

}  // namespace railyard
