#include "railyard/plugin_options.hpp"

#include "railyard/driver_check.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <utility>

namespace railyard {
namespace {

constexpr std::array<UserOptionSpec, 7> kUserOptions{{
    {UserOption::kEnable, "railyard", "enable", "on|off",
     "railyard GPU/CPU/NIC binding for this job (off: environment and affinity untouched)"},
    {UserOption::kGpu, "railyard-gpu", "gpu", "closest|rank",
     "railyard: give each task the GPU closest to its cpus, or the one at its local rank"},
    {UserOption::kVisible, "railyard-visible", "visible", "rotate|isolate|all",
     "railyard: CUDA_VISIBLE_DEVICES shows own GPU first (rotate), only it, or all as given"},
    {UserOption::kCpuBind, "railyard-cpu-bind", "cpu-bind", "on|off",
     "railyard: bind each task to the cpus near its GPU (within the allocation)"},
    {UserOption::kNet, "railyard-net", "net", "on|off",
     "railyard: set NCCL/UCX/Open MPI network variables for the NIC near each GPU"},
    {UserOption::kVerbose, "railyard-verbose", "verbose", "",
     "railyard: print one line per task (host, rank, GPU, NIC, cpus) to stderr"},
    {UserOption::kCuda, "railyard-cuda", "cuda", "MAJOR.MINOR",
     "railyard: CUDA version the job needs; the step fails on nodes whose driver is older"},
}};

// Longest argument or value accepted: far above any real one, small enough to keep messages
// and the environment sane.
constexpr size_t kMaxValueLength = 1024;

std::string printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > 200) out += "...";
  return out;
}

void check_length(std::string_view what, std::string_view value) {
  if (value.size() > kMaxValueLength) {
    throw std::invalid_argument(std::string(what) + ": value longer than " +
                                std::to_string(kMaxValueLength) + " characters");
  }
}

std::string override_names() {
  std::string out;
  for (const auto& spec : kUserOptions) {
    if (!out.empty()) out += ",";
    out += spec.override_name;
  }
  return out;
}

std::set<UserOption> all_user_options() {
  std::set<UserOption> all;
  for (const auto& spec : kUserOptions) all.insert(spec.id);
  return all;
}

std::set<UserOption> parse_user_override(std::string_view value) {
  if (value == "all") return all_user_options();
  if (value == "none") return {};
  std::set<UserOption> out;
  size_t start = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    const std::string_view name = value.substr(start, comma - start);
    const auto spec = std::find_if(kUserOptions.begin(), kUserOptions.end(),
                                   [&](const auto& s) { return s.override_name == name; });
    if (spec == kUserOptions.end()) {
      throw std::invalid_argument("unknown option name '" + printable(name) +
                                  "': allowed all, none, or a comma-separated list of " +
                                  override_names());
    }
    out.insert(spec->id);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string parse_topology_path(std::string_view value) {
  // Printable ASCII without spaces, like every other argument of a plugstack.conf line.
  const bool odd = std::any_of(value.begin(), value.end(),
                               [](unsigned char c) { return c <= 0x20 || c >= 0x7f; });
  if (value.empty() || value.front() != '/' || odd) {
    throw std::invalid_argument("invalid topology file '" + printable(value) +
                                "': allowed an absolute path (printable ASCII) to an hwloc XML "
                                "file");
  }
  return std::string(value);
}

// A CUDA version as the policy stores it, checked also against what the driver check reads,
// so a value accepted here never fails later in slurmstepd.
std::string cuda_needed(std::string_view value) {
  std::string normalized = parse_cuda_version(value);
  CudaVersion::parse(normalized);
  return normalized;
}

using AdminSetter = std::function<void(AdminConfig&, std::string_view)>;

const std::vector<std::pair<std::string_view, AdminSetter>>& admin_keys() {
  static const std::vector<std::pair<std::string_view, AdminSetter>> keys = {
      {"topology", [](AdminConfig& a, auto v) { a.topology_path = parse_topology_path(v); }},
      {"nic_include",
       [](AdminConfig& a, auto v) { a.defaults.nic_include = parse_nic_patterns(v); }},
      {"nic_exclude",
       [](AdminConfig& a, auto v) { a.defaults.nic_exclude = parse_nic_patterns(v); }},
      {"socket_ifname",
       [](AdminConfig& a, auto v) { a.defaults.socket_ifname = parse_socket_ifname(v); }},
      {"gdr_level", [](AdminConfig& a, auto v) { a.defaults.gdr_level = parse_gdr_level(v); }},
      {"default_enable", [](AdminConfig& a, auto v) { a.defaults.enabled = parse_switch(v); }},
      {"default_gpu", [](AdminConfig& a, auto v) { a.defaults.gpu_choice = parse_gpu_choice(v); }},
      {"default_visible",
       [](AdminConfig& a, auto v) { a.defaults.visible_devices = parse_visible_devices(v); }},
      {"default_cpu_bind", [](AdminConfig& a, auto v) { a.defaults.cpu_bind = parse_switch(v); }},
      {"default_net", [](AdminConfig& a, auto v) { a.defaults.net_env = parse_switch(v); }},
      {"default_verbose", [](AdminConfig& a, auto v) { a.defaults.verbose = parse_switch(v); }},
      {"default_cuda", [](AdminConfig& a, auto v) { a.defaults.required_cuda = cuda_needed(v); }},
      {"user_override",
       [](AdminConfig& a, auto v) { a.user_may_override = parse_user_override(v); }},
      {"force", [](AdminConfig& a, auto v) { a.defaults.force = parse_switch(v); }},
      {"gpu_index", [](AdminConfig& a, auto v) { a.defaults.gpu_index = parse_gpu_index(v); }},
  };
  return keys;
}

std::string admin_key_names() {
  std::string out;
  for (const auto& [key, setter] : admin_keys()) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

void apply_value(Policy& policy, UserOption option, const std::optional<std::string>& value) {
  const std::string_view v = value ? std::string_view(*value) : std::string_view();
  switch (option) {
    case UserOption::kEnable:
      policy.enabled = parse_switch(v);
      break;
    case UserOption::kGpu:
      policy.gpu_choice = parse_gpu_choice(v);
      break;
    case UserOption::kVisible:
      policy.visible_devices = parse_visible_devices(v);
      break;
    case UserOption::kCpuBind:
      policy.cpu_bind = parse_switch(v);
      break;
    case UserOption::kNet:
      policy.net_env = parse_switch(v);
      break;
    case UserOption::kVerbose:
      policy.verbose = true;
      break;
    case UserOption::kCuda:
      policy.required_cuda = cuda_needed(v);
      break;
  }
}

}  // namespace

std::span<const UserOptionSpec> user_option_specs() {
  return kUserOptions;
}

const UserOptionSpec& user_option_spec(UserOption id) {
  return *std::find_if(kUserOptions.begin(), kUserOptions.end(),
                       [&](const auto& s) { return s.id == id; });
}

AdminConfig parse_admin_args(std::span<const std::string> args) {
  AdminConfig admin;
  admin.user_may_override = all_user_options();
  std::set<std::string_view> seen;
  for (const std::string& arg : args) {
    const std::string where = "plugstack.conf argument '" + printable(arg) + "'";
    check_length(where, arg);
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument(where + " is not key=value; allowed keys: " + admin_key_names());
    }
    const std::string_view key = std::string_view(arg).substr(0, eq);
    const std::string_view value = std::string_view(arg).substr(eq + 1);
    const auto entry = std::find_if(admin_keys().begin(), admin_keys().end(),
                                    [&](const auto& k) { return k.first == key; });
    if (entry == admin_keys().end()) {
      throw std::invalid_argument(where + ": unknown key '" + printable(key) +
                                  "'; allowed keys: " + admin_key_names());
    }
    if (!seen.insert(entry->first).second) {
      throw std::invalid_argument(where + ": key '" + std::string(key) + "' is given twice");
    }
    try {
      entry->second(admin, value);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + ": " + e.what());
    }
  }
  return admin;
}

void validate_user_value(UserOption option, std::optional<std::string_view> value) {
  const UserOptionSpec& spec = user_option_spec(option);
  const std::string where =
      "--" + std::string(spec.name) + (value ? "=" + printable(*value) : std::string());
  if (spec.arginfo.empty()) {
    if (value) throw std::invalid_argument(where + ": this option takes no value");
    return;
  }
  if (!value) {
    throw std::invalid_argument(where + ": a value is needed: " + std::string(spec.arginfo));
  }
  check_length(where, *value);
  try {
    Policy scratch;
    apply_value(scratch, option, std::string(*value));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
}

Policy resolve_policy(const AdminConfig& admin, std::span<const UserSetting> settings) {
  Policy policy = admin.defaults;
  for (const UserSetting& setting : settings) {
    const UserOptionSpec& spec = user_option_spec(setting.option);
    validate_user_value(setting.option, setting.value
                                            ? std::optional<std::string_view>(*setting.value)
                                            : std::nullopt);
    if (!admin.user_may_override.contains(setting.option)) {
      std::string allowed;
      for (UserOption o : admin.user_may_override) {
        if (!allowed.empty()) allowed += ", ";
        allowed += user_option_spec(o).override_name;
      }
      throw OverrideDenied("--" + std::string(spec.name) +
                           ": the administrator does not let users change this option here "
                           "(users may change: " +
                           (allowed.empty() ? std::string("none") : allowed) + ")");
    }
    apply_value(policy, setting.option, setting.value);
  }
  return policy;
}

}  // namespace railyard
