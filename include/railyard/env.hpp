#pragma once
// Reading the process environment: a variable set to the empty string counts as unset
// everywhere in railyard (Slurm and launchers export empty values for "none").

#include <optional>
#include <string>

namespace railyard {

// The value of `name`, or nullopt when it is unset or empty.
std::optional<std::string> env_value(const char* name);

// The value of `name`, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback);

}  // namespace railyard
