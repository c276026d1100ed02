#pragma once
// The plugin's two inputs besides the hardware: the admin's plugstack.conf arguments (defaults
// and limits) and the options a user gives srun, sbatch or salloc. Both are parsed here into a
// railyard::Policy, without Slurm, so the parsing is unit-tested and fuzzed on its own.

#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/policy.hpp"

namespace railyard {

// The options users give srun/sbatch/salloc.
enum class UserOption { kEnable, kGpu, kVisible, kCpuBind, kNet, kVerbose, kCuda };

struct UserOptionSpec {
  UserOption id;
  std::string_view name;           // the option without "--": "railyard-gpu"
  std::string_view override_name;  // its name in user_override=: "gpu"
  std::string_view arginfo;        // one word for --help; empty: a flag without a value
  std::string_view usage;
};

// Every user option, in --help order.
std::span<const UserOptionSpec> user_option_specs();
const UserOptionSpec& user_option_spec(UserOption id);

struct AdminConfig {
  Policy defaults;  // what a step gets when the user says nothing
  // The cached hwloc XML of this node, an absolute path; empty: discover at each step.
  std::string topology_path;
  // The user options that may change the defaults (user_override=).
  std::set<UserOption> user_may_override;
};

// Parses plugstack.conf arguments, each "key=value" (see docs/admin.md for the keys). With no
// arguments the result is the built-in defaults, every user option overridable. Throws
// std::invalid_argument naming the argument, the value and what is allowed.
AdminConfig parse_admin_args(std::span<const std::string> args);

// Checks one user option's value (nullopt for a flag given without one). Throws
// std::invalid_argument with a message such as
// "--railyard-gpu=near: invalid GPU choice 'near': allowed closest, rank".
void validate_user_value(UserOption option, std::optional<std::string_view> value);

struct UserSetting {
  UserOption option;
  std::optional<std::string> value;  // nullopt for a flag
};

// Raised when a user option is valid but the admin does not let users change it.
class OverrideDenied : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The policy of a step: the admin defaults with the user's settings applied. Throws
// std::invalid_argument for a bad value and OverrideDenied for an option the admin keeps.
Policy resolve_policy(const AdminConfig& admin, std::span<const UserSetting> settings);

}  // namespace railyard
