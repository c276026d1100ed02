// railyard-report: a run's JSON-lines log(s) as a self-contained HTML page or an SVG image.
#include <boost/program_options.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "railyard/input_file.hpp"
#include "railyard/preempt.hpp"
#include "railyard/run_log.hpp"
#include "railyard/run_report.hpp"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  std::vector<std::string> logs;
  std::string output, title;
  po::options_description visible(
      "Usage: railyard-report RUN_LOG.jsonl [MORE.jsonl ...] -o report.html|report.svg\n"
      "Charts loss and throughput over steps with checkpoints, signals, requeues and resumes\n"
      "marked. Logs of one run's restarts (in order) are joined; independent runs (each\n"
      "starting fresh, e.g. the tasks of a sweep) are compared, one line per run.\nOptions");
  visible.add_options()("help,h", "show this help")(
      "output,o", po::value(&output), "output file; .svg writes only the charts, else HTML")(
      "title", po::value(&title), "page title (default: the first log's name)");
  po::options_description all;
  all.add(visible).add_options()("log", po::value(&logs));
  po::positional_options_description positional;
  positional.add("log", -1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << visible << '\n';
      return railyard::exit_code::kOk;
    }
    if (logs.empty()) throw po::error("give at least one run log (railyard-train --log-json FILE)");
    if (output.empty())
      throw po::error("give the output file with -o report.html or -o report.svg");
    for (const std::string& log : logs) railyard::refuse_output_over_input(output, log);
  } catch (const po::error& e) {
    std::cerr << "railyard-report: " << e.what() << "\n" << visible << '\n';
    return railyard::exit_code::kUsage;
  } catch (const std::invalid_argument& e) {
    std::cerr << "railyard-report: " << e.what() << '\n';
    return railyard::exit_code::kUsage;
  }
  try {
    const railyard::RunLog log = railyard::read_run_logs(logs);
    const bool svg = output.size() >= 4 && output.compare(output.size() - 4, 4, ".svg") == 0;
    const std::string text =
        svg ? railyard::render_report_svg(log)
            : railyard::render_report_html(log, title.empty() ? logs.front() : title);
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::cerr << "railyard-report: cannot write " << output << '\n';
      return railyard::exit_code::kFailure;
    }
  } catch (const railyard::RunLogError& e) {
    std::cerr << "railyard-report: " << e.what() << '\n';
    return railyard::exit_code::kUsage;
  }
  return railyard::exit_code::kOk;
}
