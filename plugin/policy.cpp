// Parsing of policy values and the NIC filter. Messages name the value and the allowed set so
// the SPANK glue can prefix the option and hand them to the user unchanged.

#include "railyard/policy.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>
#include <string>

#include "railyard/strings.hpp"

namespace railyard {
namespace {

std::string lower(std::string_view value) {
  std::string out(value);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

[[noreturn]] void reject(std::string_view what, std::string_view value, std::string_view allowed) {
  throw std::invalid_argument("invalid " + std::string(what) + " '" + std::string(value) +
                              "': allowed " + std::string(allowed));
}

bool all_of_chars(std::string_view s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](unsigned char c) {
    return std::isalnum(c) || extra.find(static_cast<char>(c)) != std::string_view::npos;
  });
}

}  // namespace

GpuChoice parse_gpu_choice(std::string_view value) {
  const std::string v = lower(value);
  if (v == "closest") return GpuChoice::kClosest;
  if (v == "rank") return GpuChoice::kRank;
  reject("GPU choice", value, "closest, rank");
}

VisibleDevices parse_visible_devices(std::string_view value) {
  const std::string v = lower(value);
  if (v == "rotate") return VisibleDevices::kRotate;
  if (v == "isolate") return VisibleDevices::kIsolate;
  if (v == "all") return VisibleDevices::kAll;
  reject("visible devices mode", value, "rotate, isolate, all");
}

GpuIndex parse_gpu_index(std::string_view value) {
  const std::string v = lower(value);
  if (v == "pci") return GpuIndex::kPci;
  if (v == "minor") return GpuIndex::kMinor;
  reject("GPU index order", value, "pci, minor");
}

bool parse_switch(std::string_view value) {
  const std::string v = lower(value);
  if (v == "on" || v == "yes" || v == "true" || v == "1") return true;
  if (v == "off" || v == "no" || v == "false" || v == "0") return false;
  reject("switch value", value, "on, off (or yes/no, true/false, 1/0)");
}

std::vector<std::string> parse_nic_patterns(std::string_view value) {
  std::vector<std::string> patterns = split(value, ',');
  for (const std::string& p : patterns) {
    if (p.empty() || p.size() > 64 || !all_of_chars(p, "_.:*?[]!-")) {
      reject("NIC pattern", p.empty() ? value : std::string_view(p),
             "comma-separated glob patterns of RDMA device names, e.g. mlx5_*,bnxt_re? "
             "(letters, digits and _.:*?[]!-)");
    }
  }
  return patterns;
}

std::string parse_socket_ifname(std::string_view value) {
  for (const std::string& name : split(value, ',')) {
    std::string_view bare(name);
    if (!bare.empty() && (bare.front() == '^' || bare.front() == '=')) bare.remove_prefix(1);
    if (!bare.empty() && (bare.front() == '^' || bare.front() == '=')) bare.remove_prefix(1);
    if (bare.empty() || bare.size() > 15 || !all_of_chars(bare, "_.:-")) {
      reject("socket interface", name.empty() ? value : std::string_view(name),
             "comma-separated interface names or prefixes of at most 15 characters from "
             "letters, digits and _.:-, optionally starting with ^ (exclude) or = (exact)");
    }
  }
  return std::string(value);
}

std::string parse_gdr_level(std::string_view value) {
  const std::string v = lower(value);
  if (v == "auto") return "";
  for (const char* level : {"loc", "pix", "pxb", "phb", "sys"}) {
    if (v == level) {
      std::string upper(v);
      std::transform(upper.begin(), upper.end(), upper.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      return upper;
    }
  }
  reject("GPUDirect RDMA level", value, "auto, LOC, PIX, PXB, PHB, SYS");
}

std::string parse_cuda_version(std::string_view value) {
  const size_t dot = value.find('.');
  const std::string_view major = value.substr(0, dot);
  const std::string_view minor =
      dot == std::string_view::npos ? std::string_view("0") : value.substr(dot + 1);
  auto is_number = [](std::string_view s) {
    return !s.empty() && s.size() <= 3 &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  if (!is_number(major) || !is_number(minor)) {
    reject("CUDA version", value, "MAJOR or MAJOR.MINOR, e.g. 12 or 12.4");
  }
  return std::string(major) + "." + std::to_string(std::stoi(std::string(minor)));
}

std::string_view to_string(GpuChoice choice) {
  return choice == GpuChoice::kClosest ? "closest" : "rank";
}

std::string_view to_string(VisibleDevices visible) {
  switch (visible) {
    case VisibleDevices::kRotate:
      return "rotate";
    case VisibleDevices::kIsolate:
      return "isolate";
    case VisibleDevices::kAll:
      return "all";
  }
  return "rotate";
}

std::string_view to_string(GpuIndex index) {
  return index == GpuIndex::kMinor ? "minor" : "pci";
}

bool nic_allowed(const Policy& policy, std::string_view name) {
  const std::string n(name);
  auto matches = [&](const std::string& pattern) {
    return fnmatch(pattern.c_str(), n.c_str(), 0) == 0;
  };
  if (!policy.nic_include.empty() &&
      std::none_of(policy.nic_include.begin(), policy.nic_include.end(), matches)) {
    return false;
  }
  return std::none_of(policy.nic_exclude.begin(), policy.nic_exclude.end(), matches);
}

std::string describe(const Policy& policy) {
  std::string out = "gpu=" + std::string(to_string(policy.gpu_choice)) +
                    ",visible=" + std::string(to_string(policy.visible_devices)) +
                    ",cpu=" + (policy.cpu_bind ? "on" : "off") +
                    ",net=" + (policy.net_env ? "on" : "off");
  if (!policy.gdr_level.empty()) out += ",gdr=" + policy.gdr_level;
  return out;
}

}  // namespace railyard
