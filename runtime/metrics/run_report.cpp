#include "railyard/run_report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

#include "railyard/iso_time.hpp"

namespace railyard {
namespace {

constexpr double kWidth = 1100, kLeft = 80, kRight = 30, kLegendRow = 18, kPanelHeight = 270,
                 kPanelGap = 56;
constexpr size_t kMaxPoints = 3000;  // per polyline; longer runs are thinned evenly
// Segment colours avoid the marker colours (green, red, orange, purple).
const char* const kSegmentColors[] = {"#1f77b4", "#17becf", "#8c564b", "#e377c2",
                                      "#7f7f7f", "#bcbd22", "#393b79", "#aec7e8",
                                      "#c49c94", "#dbdb8d", "#9edae5"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v, int decimals = 1) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return buffer;
}

// Tick labels: 3 significant digits, with k/M for throughput-sized numbers. With the ticks'
// spacing given, enough decimals that neighbouring ticks never read the same (10.85, 10.9).
std::string tick_label(double v, double spacing = 0) {
  char buffer[48];
  const double a = std::fabs(v);
  const double scale = a >= 1e6 ? 1e6 : a >= 1e3 ? 1e3 : 1;
  const char* suffix = a >= 1e6 ? "M" : a >= 1e3 ? "k" : "";
  if (spacing > 0) {
    const int decimals =
        std::max(0, static_cast<int>(std::ceil(-std::log10(spacing / scale) - 1e-9)));
    std::snprintf(buffer, sizeof buffer, "%.*f%s", decimals, v / scale, suffix);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.3g%s", v / scale, suffix);
  }
  return buffer;
}

// About `count` round ticks (1, 2, 5 times a power of ten) covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int count) {
  const double raw = (hi - lo) / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (raw <= step) break;
  }
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    out.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return out;
}

// The signal's name in an event's detail ("requeue | SIGUSR1 on rank 0" -> " SIGUSR1"): its
// first upper-case word of two or more letters and digits; "" when there is none.
std::string signal_word(const std::string& detail) {
  size_t i = 0;
  while (i < detail.size()) {
    size_t j = i;
    while (j < detail.size() && ((detail[j] >= 'A' && detail[j] <= 'Z') ||
                                 (j > i && detail[j] >= '0' && detail[j] <= '9'))) {
      ++j;
    }
    const bool bounded =
        (i == 0 || !std::isalnum(static_cast<unsigned char>(detail[i - 1]))) &&
        (j == detail.size() || !std::isalnum(static_cast<unsigned char>(detail[j])));
    if (j - i >= 2 && bounded) return ' ' + detail.substr(i, j - i);
    i = j > i ? j : i + 1;
  }
  return "";
}

struct Analysis {
  // Independent runs (group_runs) and each segment's run; with several, the charts compare
  // them (one colour per run) instead of telling one run's story (one colour per process).
  std::vector<RunLogRun> runs;
  std::vector<size_t> run_of;
  int64_t x_min = 0, x_max = 1;
  double loss_lo = 0, loss_hi = 1, tps_hi = 1;
  // Per segment: steps above this were redone by a later segment (a resume from an older
  // checkpoint), so their work was lost.
  std::vector<int64_t> redone_above;
  size_t steps = 0, redone_steps = 0;
  double redone_seconds = 0;
};

// Per segment, the step above which a later process run of the same run redid its steps (a
// resume from an older checkpoint); no limit where none did.
std::vector<int64_t> redone_limits(const RunLog& log, const std::vector<size_t>& run_of) {
  std::vector<int64_t> redone_above(log.segments.size(), std::numeric_limits<int64_t>::max());
  int64_t restart = std::numeric_limits<int64_t>::max();
  for (size_t i = log.segments.size(); i-- > 0;) {
    // Only a later process run of the same run redoes steps.
    if (i + 1 < log.segments.size() && run_of[i + 1] != run_of[i]) {
      restart = std::numeric_limits<int64_t>::max();
    }
    redone_above[i] = restart;
    const RunLogSegment& s = log.segments[i];
    if (!s.steps.empty()) {
      restart = std::min(restart, s.steps.front().step - 1);
    } else if (s.kind == "resume") {
      restart = std::min(restart, s.resumed_from);
    }
  }
  return redone_above;
}

// The ranges the charts cover, before padding.
struct Extent {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  double tps = 0;
  int64_t x_min = std::numeric_limits<int64_t>::max();
  int64_t x_max = std::numeric_limits<int64_t>::min();

  void add_loss(double loss) {
    if (!std::isfinite(loss)) return;
    lo = std::min(lo, loss);
    hi = std::max(hi, loss);
  }
};

// Counts the steps (and the redone ones, with their time) into `a`; returns their extent.
Extent scan_steps(const RunLog& log, Analysis& a) {
  Extent e;
  for (size_t i = 0; i < log.segments.size(); ++i) {
    for (const RunLogStep& s : log.segments[i].steps) {
      ++a.steps;
      e.x_min = std::min(e.x_min, s.step);
      e.x_max = std::max(e.x_max, s.step);
      e.add_loss(s.loss);
      if (std::isfinite(s.tokens_per_s)) e.tps = std::max(e.tps, s.tokens_per_s);
      if (s.step > a.redone_above[i]) {
        ++a.redone_steps;
        a.redone_seconds += s.step_seconds;
      }
    }
  }
  return e;
}

// The axes: steps from 0 (or below), losses padded by 5%, throughput with 8% headroom.
void set_scales(Analysis& a, Extent e) {
  e.x_min = std::min<int64_t>(e.x_min, 0);
  a.x_min = e.x_min;
  a.x_max = e.x_max > e.x_min ? e.x_max : e.x_min + 1;
  if (!std::isfinite(e.lo)) e.lo = 0, e.hi = 1;
  const double pad = e.hi > e.lo ? 0.05 * (e.hi - e.lo) : 0.5;
  a.loss_lo = e.lo - pad;
  a.loss_hi = e.hi + pad;
  a.tps_hi = e.tps > 0 ? e.tps * 1.08 : 1;
}

Analysis analyse(const RunLog& log) {
  Analysis a;
  a.runs = group_runs(log);
  a.run_of.assign(log.segments.size(), 0);
  for (size_t r = 0; r < a.runs.size(); ++r) {
    for (size_t i : a.runs[r].segments) a.run_of[i] = r;
  }
  a.redone_above = redone_limits(log, a.run_of);
  Extent extent = scan_steps(log, a);
  if (a.steps == 0) {
    throw RunLogError((log.files.empty() ? std::string("run log") : log.files.front()) +
                      ": no step records to chart (is this a railyard-train --log-json file?)");
  }
  for (const RunLogEval& e : log.evals) extent.add_loss(e.val_loss);
  set_scales(a, extent);
  return a;
}

struct Panel {
  const char* name;  // data-series of its lines
  const char* title;
  double top, lo, hi;
  double (*value)(const RunLogStep&);
};

class SvgWriter {
 public:
  SvgWriter(const RunLog& log, const Analysis& a) : log_(log), a_(a) {}

  std::string render() {
    const std::string legend_svg = legend();
    const double legend_bottom = 28 + kLegendRow * static_cast<double>(legend_rows_);
    const Panel panels[] = {{"loss", "training loss (dots: validation loss)", legend_bottom + 20,
                             a_.loss_lo, a_.loss_hi, [](const RunLogStep& s) { return s.loss; }},
                            {"throughput", "throughput, tokens/s (all ranks)",
                             legend_bottom + 20 + kPanelHeight + kPanelGap, 0, a_.tps_hi,
                             [](const RunLogStep& s) { return s.tokens_per_s; }}};
    const double height = panels[1].top + kPanelHeight + 44;
    out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth, 0) + "\" height=\"" +
            num(height, 0) + "\" viewBox=\"0 0 " + num(kWidth, 0) + ' ' + num(height, 0) +
            "\" font-family=\"sans-serif\" font-size=\"12\">\n";
    out_ += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
    out_ += legend_svg;
    for (const Panel& p : panels) frame(p);
    marks(panels[0], panels[1]);
    for (const Panel& p : panels) series(p);
    evals(panels[0]);
    out_ += "</svg>\n";
    return out_;
  }

 private:
  double plot_width() const { return kWidth - kLeft - kRight; }
  double x(int64_t step) const {
    return kLeft + plot_width() * static_cast<double>(step - a_.x_min) /
                       static_cast<double>(a_.x_max - a_.x_min);
  }
  static double y(const Panel& p, double v) {
    const double clamped = std::clamp(v, p.lo, p.hi);
    return p.top + kPanelHeight * (1.0 - (clamped - p.lo) / (p.hi - p.lo));
  }
  bool comparing() const { return a_.runs.size() > 1; }
  // A segment's colour: its process run's, or its run's when runs are compared.
  const char* color(size_t segment) const {
    const size_t k = comparing() ? a_.run_of[segment] : segment;
    return kSegmentColors[k % (sizeof kSegmentColors / sizeof kSegmentColors[0])];
  }

  // The legend's SVG, in as many rows as it needs (legend_rows_).
  std::string legend() {
    std::string svg;
    double cx = kLeft;
    legend_rows_ = 1;
    const auto item = [&](const std::string& swatch, const std::string& label) {
      const double width = 40 + 7.0 * static_cast<double>(label.size());
      if (cx > kLeft && cx + width > kWidth - kRight) {
        cx = kLeft;
        ++legend_rows_;
      }
      svg += "<g transform=\"translate(" + num(cx) + "," +
             num(22 + kLegendRow * static_cast<double>(legend_rows_ - 1)) + ")\">" + swatch +
             "<text x=\"26\" y=\"4\">" + escape(label) + "</text></g>\n";
      cx += width;
    };
    size_t shown = 0;
    for (size_t r = 0; comparing() && r < a_.runs.size(); ++r) {
      item(std::string("<line x1=\"0\" x2=\"20\" stroke=\"") + color(a_.runs[r].segments.front()) +
               "\" stroke-width=\"2\"/>",
           a_.runs[r].name);
    }
    for (size_t i = 0; !comparing() && i < log_.segments.size(); ++i) {
      const RunLogSegment& s = log_.segments[i];
      if (s.steps.empty()) continue;
      std::string label = "run " + std::to_string(++shown);
      if (s.kind == "resume") label += " (resumed at " + std::to_string(s.resumed_from) + ")";
      item(std::string("<line x1=\"0\" x2=\"20\" stroke=\"") + color(i) + "\" stroke-width=\"2\"/>",
           label);
    }
    if (a_.redone_steps > 0) {
      item("<line x1=\"0\" x2=\"20\" stroke=\"#888\" stroke-width=\"2\" stroke-dasharray=\"4 3\"/>",
           "redone after resume");
    }
    item(mark_line("checkpoint", 10, -7, 7), "checkpoint");
    item(mark_line("signal", 10, -7, 7), "signal");
    item(mark_line("requeue", 10, -7, 7), "requeue");
    item(mark_line("resume", 10, -7, 7), "resume");
    return svg;
  }

  static std::string mark_line(const std::string& kind, double px, double y1, double y2) {
    std::string style;
    if (kind == "checkpoint") {
      style = "stroke=\"#2ca02c\" stroke-opacity=\"0.55\"";
    } else if (kind == "signal") {
      style = "stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"";
    } else if (kind == "requeue") {
      style = "stroke=\"#ff7f0e\" stroke-width=\"1.5\" stroke-dasharray=\"2 2\"";
    } else {
      style = "stroke=\"#9467bd\" stroke-width=\"2\"";
    }
    return "<line x1=\"" + num(px) + "\" x2=\"" + num(px) + "\" y1=\"" + num(y1) + "\" y2=\"" +
           num(y2) + "\" " + style + "/>";
  }

  void frame(const Panel& p) {
    const double bottom = p.top + kPanelHeight;
    out_ += "<g class=\"frame\" data-panel=\"" + std::string(p.name) + "\">\n";
    out_ += "<text x=\"" + num(kLeft) + "\" y=\"" + num(p.top - 6) + "\" font-weight=\"bold\">" +
            escape(p.title) + "</text>\n";
    const std::vector<double> y_ticks = ticks(p.lo, p.hi, 5);
    const double y_spacing = y_ticks.size() > 1 ? y_ticks[1] - y_ticks[0] : 0;
    for (double t : y_ticks) {
      const double ty = y(p, t);
      out_ += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kWidth - kRight) + "\" y1=\"" +
              num(ty) + "\" y2=\"" + num(ty) + "\" stroke=\"#e6e6e6\"/>";
      out_ += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(ty + 4) +
              "\" text-anchor=\"end\" fill=\"#444\">" + tick_label(t, y_spacing) + "</text>\n";
    }
    for (double t : ticks(static_cast<double>(a_.x_min), static_cast<double>(a_.x_max), 10)) {
      const double tx = x(static_cast<int64_t>(std::llround(t)));
      out_ += "<line x1=\"" + num(tx) + "\" x2=\"" + num(tx) + "\" y1=\"" + num(bottom) +
              "\" y2=\"" + num(bottom + 4) + "\" stroke=\"#444\"/>";
      out_ += "<text x=\"" + num(tx) + "\" y=\"" + num(bottom + 17) +
              "\" text-anchor=\"middle\" fill=\"#444\">" + tick_label(t) + "</text>\n";
    }
    out_ += "<text x=\"" + num(kLeft + plot_width() / 2) + "\" y=\"" + num(bottom + 33) +
            "\" text-anchor=\"middle\" fill=\"#444\">step</text>\n";
    out_ += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(p.top) + "\" width=\"" + num(plot_width()) +
            "\" height=\"" + num(kPanelHeight) + "\" fill=\"none\" stroke=\"#999\"/>\n</g>\n";
  }

  void marks(const Panel& top, const Panel& bottom) {
    // Labels of events at (nearly) the same step stand side by side, not on top of each other.
    std::vector<double> label_x;
    for (const RunLogMark& m : log_.marks) {
      if (m.kind != RunMarkKind::kCheckpoint && m.kind != RunMarkKind::kSignal &&
          m.kind != RunMarkKind::kRequeue && m.kind != RunMarkKind::kResume) {
        continue;
      }
      const std::string kind = mark_kind_name(m.kind);
      const double px = x(m.step);
      out_ += "<g class=\"mark\" data-mark=\"" + kind + "\" data-step=\"" + std::to_string(m.step) +
              "\"><title>" +
              escape(kind + " at step " + std::to_string(m.step) +
                     (m.detail.empty() ? "" : ": " + m.detail)) +
              "</title>";
      for (const Panel* p : {&top, &bottom}) {
        out_ += mark_line(kind, px, p->top, p->top + kPanelHeight);
      }
      if (m.kind != RunMarkKind::kCheckpoint) {
        std::string label = kind;
        if (m.kind == RunMarkKind::kSignal) label += signal_word(m.detail);
        if (m.kind == RunMarkKind::kResume) label += " @" + std::to_string(m.step);
        double lx = px + 4;
        for (double used : label_x) {
          if (std::fabs(used - lx) < 13) lx = used + 13;
        }
        label_x.push_back(lx);
        out_ += "<text transform=\"translate(" + num(lx) + "," + num(top.top + 8) +
                ") rotate(90)\" font-size=\"11\" fill=\"#333\">" + escape(label) + "</text>";
      }
      out_ += "</g>\n";
    }
  }

  void polyline(const Panel& p, size_t segment, const std::vector<const RunLogStep*>& points,
                bool redone) {
    if (points.empty()) return;
    const size_t stride = (points.size() + kMaxPoints - 1) / kMaxPoints;
    std::string coords;
    for (size_t i = 0; i < points.size(); ++i) {
      if (i % stride != 0 && i + 1 != points.size()) continue;
      const double v = p.value(*points[i]);
      if (!std::isfinite(v)) continue;  // a diverged (NaN) step has no point
      coords += num(x(points[i]->step)) + ',' + num(y(p, v)) + ' ';
    }
    out_ += "<polyline class=\"series\" data-series=\"" + std::string(p.name) +
            "\" data-segment=\"" + std::to_string(segment) + "\" data-part=\"" +
            (redone ? "redone" : "kept") + "\" data-points=\"" + std::to_string(points.size()) +
            "\" fill=\"none\" stroke=\"" + color(segment) + "\" stroke-width=\"1.6\"" +
            (redone ? " stroke-dasharray=\"4 3\" stroke-opacity=\"0.6\"" : "") +
            " stroke-linejoin=\"round\" points=\"" + coords + "\"/>\n";
  }

  void series(const Panel& p) {
    for (size_t i = 0; i < log_.segments.size(); ++i) {
      std::vector<const RunLogStep*> kept, redone;
      for (const RunLogStep& s : log_.segments[i].steps) {
        (s.step > a_.redone_above[i] ? redone : kept).push_back(&s);
      }
      // The redone part starts at the last kept point so the line stays connected.
      if (!kept.empty() && !redone.empty()) redone.insert(redone.begin(), kept.back());
      polyline(p, i, kept, false);
      polyline(p, i, redone, true);
    }
  }

  void evals(const Panel& p) {
    for (const RunLogEval& e : log_.evals) {
      if (!std::isfinite(e.val_loss)) continue;
      out_ += "<circle data-series=\"val_loss\" cx=\"" + num(x(e.step)) + "\" cy=\"" +
              num(y(p, e.val_loss)) + "\" r=\"3.5\" fill=\"#ff7f0e\" stroke=\"#fff\"><title>" +
              "validation loss " + num(e.val_loss, 4) + " at step " + std::to_string(e.step) +
              "</title></circle>\n";
    }
  }

  const RunLog& log_;
  const Analysis& a_;
  std::string out_;
  size_t legend_rows_ = 1;
};

std::string utc(double unix_seconds) {
  return unix_seconds <= 0 ? "" : iso_time(unix_seconds);
}

std::string duration(double seconds) {
  char buffer[48];
  if (seconds >= 3600) {
    std::snprintf(buffer, sizeof buffer, "%.0f h %02.0f min", std::floor(seconds / 3600),
                  std::floor(std::fmod(seconds, 3600) / 60));
  } else if (seconds >= 60) {
    std::snprintf(buffer, sizeof buffer, "%.0f min %02.0f s", std::floor(seconds / 60),
                  std::fmod(seconds, 60));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1f s", seconds);
  }
  return buffer;
}

// What the summary says about one run (its segments).
struct RunStats {
  const RunLogStep* last = nullptr;  // the last step kept (not redone)
  double best = std::numeric_limits<double>::infinity();
  std::string median_throughput = "-";
  size_t processes = 0, redone_steps = 0;
  double redone_seconds = 0, first_time = 0, last_time = 0;
};

RunStats stats_of(const RunLog& log, const Analysis& a, const std::vector<size_t>& segments) {
  RunStats r;
  std::vector<double> throughput;
  for (size_t i : segments) {
    r.processes += log.segments[i].steps.empty() ? 0 : 1;
    for (const RunLogStep& s : log.segments[i].steps) {
      if (s.time > 0 && (r.first_time == 0 || s.time < r.first_time)) r.first_time = s.time;
      r.last_time = std::max(r.last_time, s.time);
      if (s.step > a.redone_above[i]) {
        ++r.redone_steps;
        r.redone_seconds += s.step_seconds;
        continue;
      }
      r.last = &s;
      if (std::isfinite(s.loss)) r.best = std::min(r.best, s.loss);
      throughput.push_back(s.tokens_per_s);
    }
  }
  std::sort(throughput.begin(), throughput.end());
  if (!throughput.empty()) {
    r.median_throughput = tick_label(throughput[throughput.size() / 2]) + " tokens/s";
  }
  return r;
}

// Several independent runs: how many, then one row per run.
std::string comparison(const RunLog& log, const Analysis& a) {
  std::string rows;
  for (const RunLogRun& run : a.runs) {
    const RunStats r = stats_of(log, a, run.segments);
    rows += "<tr><td>" + escape(run.name) + "</td><td>" +
            (r.last ? std::to_string(r.last->step) : "-") + "</td><td>" +
            (r.last ? num(r.last->loss, 4) : "-") + "</td><td>" +
            (std::isfinite(r.best) ? num(r.best, 4) : "-") + "</td><td>" +
            escape(r.median_throughput) + "</td><td>" + std::to_string(r.processes) + "</td><td>" +
            std::to_string(r.redone_steps) + "</td></tr>\n";
  }
  return "<table class=\"summary\">\n<tr><th>runs compared</th><td>" +
         std::to_string(a.runs.size()) +
         "</td></tr>\n</table>\n<table class=\"runs\">\n<tr><th>run</th><th>last step</th>"
         "<th>final loss</th><th>best loss</th><th>median throughput</th><th>process runs</th>"
         "<th>steps redone</th></tr>\n" +
         rows + "</table>\n";
}

std::string summary(const RunLog& log, const Analysis& a) {
  if (a.runs.size() > 1) return comparison(log, a);
  const RunStats r = stats_of(log, a, a.runs.front().segments);
  const RunLogStep* last = r.last;
  const size_t runs = r.processes;
  size_t checkpoints = 0, signals = 0, requeues = 0;
  for (const RunLogMark& m : log.marks) {
    checkpoints += m.kind == RunMarkKind::kCheckpoint;
    signals += m.kind == RunMarkKind::kSignal;
    requeues += m.kind == RunMarkKind::kRequeue;
  }
  std::string rows;
  const auto row = [&](const std::string& k, const std::string& v) {
    rows += "<tr><th>" + escape(k) + "</th><td>" + escape(v) + "</td></tr>\n";
  };
  row("last step", last ? std::to_string(last->step) : "-");
  row("final loss", last ? num(last->loss, 4) : "-");
  row("best loss", std::isfinite(r.best) ? num(r.best, 4) : "-");
  row("median throughput", r.median_throughput);
  row("process runs",
      std::to_string(runs) + (runs > 1 ? " (" + std::to_string(runs - 1) + " resumed)" : ""));
  row("checkpoints", std::to_string(checkpoints));
  row("signals / requeues", std::to_string(signals) + " / " + std::to_string(requeues));
  row("steps redone after resumes",
      std::to_string(a.redone_steps) + " (" + duration(a.redone_seconds) + " of training lost)");
  if (r.first_time > 0) {
    row("first / last step", utc(r.first_time) + " / " + utc(r.last_time) + " UTC (" +
                                 duration(r.last_time - r.first_time) + ")");
  }
  return "<table class=\"summary\">\n" + rows + "</table>\n";
}

std::string events(const RunLog& log, const Analysis& a) {
  std::string rows;
  for (const RunLogMark& m : log.marks) {
    // The process run, or, when runs are compared, the run's name.
    const std::string run = a.runs.size() > 1 ? escape(a.runs[a.run_of[m.segment]].name)
                                              : std::to_string(m.segment + 1);
    rows += "<tr class=\"event-" + std::string(mark_kind_name(m.kind)) + "\"><td>" + run +
            "</td><td>" + utc(m.time) + "</td><td>" + std::to_string(m.step) + "</td><td>" +
            mark_kind_name(m.kind) + "</td><td>" + escape(m.detail) + "</td></tr>\n";
  }
  return "<table class=\"events\">\n<tr><th>run</th><th>time (UTC)</th><th>step</th>"
         "<th>event</th><th>detail</th></tr>\n" +
         rows + "</table>\n";
}

}  // namespace

std::string render_report_svg(const RunLog& log) {
  const Analysis a = analyse(log);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + SvgWriter(log, a).render();
}

std::string render_report_html(const RunLog& log, const std::string& title) {
  const Analysis a = analyse(log);
  std::string files;
  for (const std::string& f : log.files) files += (files.empty() ? "" : ", ") + escape(f);
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
         escape(title) +
         "</title>\n<style>\n"
         "body{font-family:sans-serif;margin:24px;color:#222;max-width:1140px}\n"
         "h1{font-size:20px;margin:0 0 4px}\n.files{color:#666;font-size:13px;margin-bottom:14px}\n"
         "table{border-collapse:collapse;font-size:13px;margin:10px 0}\n"
         "th,td{border:1px solid #ddd;padding:3px 8px;text-align:left}\n"
         ".summary th{background:#f5f5f5;font-weight:normal;width:220px}\n"
         ".events th,.runs th{background:#f5f5f5}\n.event-signal td,.event-requeue td{color:#b22}\n"
         ".event-resume td{color:#639}\n"
         "</style>\n</head>\n<body>\n<h1>" +
         escape(title) + "</h1>\n<div class=\"files\">from " + files + "</div>\n" +
         summary(log, a) + SvgWriter(log, a).render() + "<h2>Events</h2>\n" + events(log, a) +
         "</body>\n</html>\n";
}

}  // namespace railyard
