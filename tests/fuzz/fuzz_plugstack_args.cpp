// Fuzzes parse_admin_args with a plugstack.conf line's arguments (the input split at
// whitespace, as Slurm splits it). A bad line may only be refused with std::invalid_argument;
// an accepted one must hold only values the plugin may later write into a task's environment.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "railyard/driver_check.hpp"
#include "railyard/plugin_options.hpp"
#include "railyard/step_env.hpp"

namespace {

void require(bool condition) {
  if (!condition) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args;
  std::string current;
  for (char c : line) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!current.empty()) args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) args.push_back(current);

  try {
    const railyard::AdminConfig admin = railyard::parse_admin_args(args);
    const railyard::Policy& p = admin.defaults;
    require(admin.topology_path.empty() || admin.topology_path.front() == '/');
    require(railyard::safe_env_value(admin.topology_path));
    require(railyard::safe_env_value(p.socket_ifname));
    require(railyard::safe_env_value(p.gdr_level));
    require(railyard::safe_env_value(p.required_cuda));
    require(railyard::safe_env_value(railyard::describe(p)));
    for (const auto& pattern : p.nic_include) require(railyard::safe_env_value(pattern));
    for (const auto& pattern : p.nic_exclude) require(railyard::safe_env_value(pattern));
    if (!p.required_cuda.empty()) railyard::CudaVersion::parse(p.required_cuda);
  } catch (const std::invalid_argument&) {
    // Refused with a message: the expected outcome for most inputs.
  }
  return 0;
}
