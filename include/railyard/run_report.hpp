#pragma once
// The run report: loss and throughput over steps as inline SVG, with checkpoints, signals,
// requeues and resumes marked, and steps that a resume redid drawn dashed. Several independent
// runs (group_runs) are compared: one colour per run, a legend naming each, and a summary row
// per run. The HTML form adds a summary and an event table; it is self-contained (no scripts,
// no external files).

#include <string>

#include "railyard/run_log.hpp"

namespace railyard {

// A standalone SVG document (both charts). Throws RunLogError when the log has no steps.
std::string render_report_svg(const RunLog& log);
// A complete HTML page titled `title`. Throws RunLogError when the log has no steps.
std::string render_report_html(const RunLog& log, const std::string& title);

}  // namespace railyard
