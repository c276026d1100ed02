#pragma once
// A mistake in how a command was called (an option, its value, a missing input): the commands
// print it with a pointer to --help and exit with exit_code::kUsage.

#include <stdexcept>

namespace railyard {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace railyard
