// Fuzzes the checks of srun/sbatch/salloc option values. The first byte picks the option (its
// top bit: given as a flag, without a value), the rest is the value. A bad value may only be
// refused with std::invalid_argument; an accepted one must resolve into a policy whose values
// are safe to write into a task's environment, and a CUDA version the driver check can read.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "railyard/driver_check.hpp"
#include "railyard/plugin_options.hpp"
#include "railyard/step_env.hpp"

namespace {

void require(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto specs = railyard::user_option_specs();
  const railyard::UserOption option = specs[(data[0] & 0x7f) % specs.size()].id;
  std::optional<std::string> value;
  if ((data[0] & 0x80) == 0) value = std::string(reinterpret_cast<const char*>(data + 1), size - 1);

  bool valid = false;
  try {
    railyard::validate_user_value(option, value);
    valid = true;
  } catch (const std::invalid_argument&) {
  }

  static const railyard::AdminConfig admin = railyard::parse_admin_args({});
  const railyard::UserSetting setting{option, value};
  try {
    const railyard::Policy p = railyard::resolve_policy(admin, std::span(&setting, 1));
    require(valid);  // resolve accepts exactly what validate accepts when all is overridable
    require(railyard::safe_env_value(railyard::describe(p)));
    require(railyard::safe_env_value(p.required_cuda));
    if (!p.required_cuda.empty()) railyard::CudaVersion::parse(p.required_cuda);
  } catch (const std::invalid_argument&) {
    require(!valid);
  }
  return 0;
}
