#pragma once
// A run's JSON-lines log (railyard-train --log-json) read back for reports: one object per
// line with "type" step, eval, checkpoint or run (the TrainObserver events, field for field).
// A run that is resumed appends to the same file or writes another; either way the log is cut
// into segments, one per process lifetime, at each "start"/"resume" event and at each file.

#include <cstdint>
#include <istream>
#include <stdexcept>
#include <string>
#include <vector>

namespace railyard {

// Bad input; what() is "FILE:LINE: what is wrong".
class RunLogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RunLogStep {
  int64_t step = 0;
  double time = 0;  // unix seconds; 0 when the line has none
  double loss = 0;  // NaN where the log has null (a diverged step)
  double tokens_per_s = 0;
  double step_seconds = 0;
};

struct RunLogSegment {
  std::string origin;        // "FILE:LINE" of its first line
  std::string kind;          // "start", "resume", or "continued" (a file without either)
  int64_t resumed_from = 0;  // the checkpoint step of a "resume"
  std::vector<RunLogStep> steps;
};

enum class RunMarkKind { kCheckpoint, kSignal, kRequeue, kResume, kStart, kStop, kFinish };

struct RunLogMark {
  RunMarkKind kind;
  int64_t step = 0;
  double time = 0;
  std::string detail;  // signal name, checkpoint reason and size, ...
  size_t segment = 0;
};

struct RunLogEval {
  int64_t step = 0;
  double val_loss = 0;
  size_t segment = 0;
};

struct RunLog {
  std::vector<std::string> files;
  std::vector<RunLogSegment> segments;
  std::vector<RunLogMark> marks;
  std::vector<RunLogEval> evals;
};

// Appends one file's lines, `name` naming it in errors. Blank lines, lines of other types and
// run events of other kinds ("launch", "bind") are skipped; malformed JSON, a line without
// "type", and a missing or mistyped field of a known type throw RunLogError.
void append_run_log(RunLog& log, std::istream& in, const std::string& name);
// Reads the files in the order given; throws RunLogError for a missing file too.
RunLog read_run_logs(const std::vector<std::string>& paths);

// One training run: its segments (indices into RunLog::segments, in order) and a short name.
struct RunLogRun {
  std::string name;
  std::vector<size_t> segments;
};

// The log's segments grouped into runs. A "start" opens a new run (an independent job or
// configuration, compared side by side), except right after a segment that requeued its job (a
// job requeued before its first checkpoint starts afresh, but is still the same run); "resume"
// and "continued" segments join the run before them. Names: the run's file path, shortened by
// what all the runs' paths share ("runs/a/log.jsonl", "runs/b/log.jsonl" -> "a", "b"), with
// "#k" for the k-th run of one file.
std::vector<RunLogRun> group_runs(const RunLog& log);

const char* mark_kind_name(RunMarkKind kind);

}  // namespace railyard
