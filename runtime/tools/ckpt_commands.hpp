#pragma once
// Subcommands of railyard-ckpt that live outside railyard_ckpt_main.cpp (one file each).
#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

#include "railyard/sampler.hpp"

// The command line of one command: the options of `visible` plus one positional operand, stored
// as "operand". nullopt when --help was asked for (and printed). Throws
// boost::program_options::error naming a bad option, or "missing <operand>" when it is absent.
std::optional<boost::program_options::variables_map> parse_with_operand(
    const std::vector<std::string>& args,
    const boost::program_options::options_description& visible, const std::string& operand);

// What `railyard-ckpt sample` was asked to do.
struct SampleArgs {
  std::string model, prompt, prompt_ids, dump;
  bool have_prompt = false, force = false;
  railyard::SampleOptions opts;
};

// The options of `railyard-ckpt sample MODEL ...` (usage in kSampleUsage); nullopt when --help
// was asked for (and printed). Throws boost::program_options::error naming a bad option.
std::optional<SampleArgs> parse_sample_args(const std::vector<std::string>& args);

// Runs `sample` with parsed options; returns the exit code.
int ckpt_sample_command(const SampleArgs& a);

extern const char* const kSampleUsage;
