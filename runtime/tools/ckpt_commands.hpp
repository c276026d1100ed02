#pragma once
// Subcommands of railyard-ckpt that live outside railyard_ckpt_main.cpp (one file each).
#include <string>
#include <vector>

// `railyard-ckpt sample MODEL ...` (usage in kSampleUsage); returns the exit code.
int ckpt_sample_command(const std::vector<std::string>& args);

extern const char* const kSampleUsage;
