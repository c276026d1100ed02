#include "railyard/env.hpp"

#include <cstdlib>

namespace railyard {

std::optional<std::string> env_value(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string env_or(const char* name, const std::string& fallback) {
  return env_value(name).value_or(fallback);
}

}  // namespace railyard
