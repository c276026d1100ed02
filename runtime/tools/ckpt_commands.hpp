#pragma once
// Subcommands of railyard-ckpt that live outside railyard_ckpt_main.cpp (one file each).
#include <optional>
#include <string>
#include <vector>

#include "railyard/sampler.hpp"

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
