// The command line shared by railyard-ckpt's commands: options and one operand.
#include <iostream>

#include "ckpt_commands.hpp"

namespace po = boost::program_options;

std::optional<po::variables_map> parse_with_operand(const std::vector<std::string>& args,
                                                    const po::options_description& visible,
                                                    const std::string& operand) {
  po::options_description all;
  all.add(visible).add_options()("operand", po::value<std::string>(), operand.c_str());
  po::positional_options_description positional;
  positional.add("operand", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << visible;
    return std::nullopt;
  }
  po::notify(vm);
  if (!vm.count("operand")) throw po::error("missing " + operand);
  return vm;
}
