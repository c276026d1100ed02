#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "railyard/run_log.hpp"
#include "railyard/run_report.hpp"

namespace railyard {
namespace {

// A run whose loss moves only between 10.83 and 11.05, as a short GPT-2 run does.
RunLog narrow_run() {
  std::ostringstream lines;
  lines << R"({"type":"run","kind":"start","step":0,"time":1000})"
        << "\n";
  for (int step = 1; step <= 400; ++step) {
    lines << R"({"type":"step","step":)" << step << R"(,"time":)" << 1000 + step << R"(,"loss":)"
          << 11.05 - 0.00055 * step << R"(,"tokens_per_s":540000,"step_seconds":0.03})"
          << "\n";
  }
  RunLog log;
  std::istringstream in(lines.str());
  append_run_log(log, in, "narrow.jsonl");
  return log;
}

TEST(RunReport, AxisLabelsOfANarrowLossRangeAreAllDifferent) {
  const std::string svg = render_report_svg(narrow_run());
  // The panels' y labels: right-aligned texts left of the plot.
  const std::string open = "text-anchor=\"end\" fill=\"#444\">";
  std::multiset<std::string> seen;
  for (size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    const size_t begin = at + open.size();
    seen.insert(svg.substr(begin, svg.find('<', begin) - begin));
  }
  ASSERT_GE(seen.size(), 6u);
  for (const std::string& s : seen) EXPECT_EQ(seen.count(s), 1u) << "label '" << s << "' repeats";
  EXPECT_EQ(seen.count("10.85"), 1u);
  EXPECT_EQ(seen.count("400k"), 1u);
}

}  // namespace
}  // namespace railyard
