#include "railyard/driver_check.hpp"

#include <array>
#include <charconv>
#include <fstream>
#include <sstream>
#include <system_error>

#include "railyard/nvml_loader.hpp"

namespace railyard {
namespace {

// Parses a non-negative decimal field of at most 6 digits (versions never need more; the bound
// keeps overflow out of the question).
std::optional<int> parse_field(std::string_view s) {
  if (s.empty() || s.size() > 6 || s.front() < '0' || s.front() > '9') return std::nullopt;
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

// Splits "a.b.c" into at most `max_fields` numeric fields; nullopt on anything else.
template <size_t N>
std::optional<std::array<int, N>> parse_dotted(std::string_view s, size_t min_fields) {
  std::array<int, N> out{};
  size_t count = 0;
  while (true) {
    const size_t dot = s.find('.');
    const std::string_view field = s.substr(0, dot);
    if (count == N) return std::nullopt;
    const auto v = parse_field(field);
    if (!v) return std::nullopt;
    out[count++] = *v;
    if (dot == std::string_view::npos) break;
    s.remove_prefix(dot + 1);
  }
  if (count < min_fields) return std::nullopt;
  return out;
}

std::optional<DriverVersion> try_driver_version(std::string_view text) {
  const auto f = parse_dotted<3>(text, 2);
  if (!f) return std::nullopt;
  return DriverVersion{(*f)[0], (*f)[1], (*f)[2]};
}

struct ToolkitMinimum {
  CudaVersion cuda;
  DriverVersion driver;
};

// Minimum Linux x86_64 driver of each CUDA toolkit's GA release, newest first (NVIDIA CUDA
// Toolkit release notes). There is no CUDA 12.7 toolkit: R565 drivers serve 12.6 toolkits.
constexpr std::array<ToolkitMinimum, 28> kToolkitMinimums{{
    {{13, 0}, {580, 65, 6}},  {{12, 9}, {575, 51, 3}}, {{12, 8}, {570, 26, 0}},
    {{12, 6}, {560, 28, 3}},  {{12, 5}, {555, 42, 2}}, {{12, 4}, {550, 54, 14}},
    {{12, 3}, {545, 23, 6}},  {{12, 2}, {535, 54, 3}}, {{12, 1}, {530, 30, 2}},
    {{12, 0}, {525, 60, 13}}, {{11, 8}, {520, 61, 5}}, {{11, 7}, {515, 43, 4}},
    {{11, 6}, {510, 39, 1}},  {{11, 5}, {495, 29, 5}}, {{11, 4}, {470, 42, 1}},
    {{11, 3}, {465, 19, 1}},  {{11, 2}, {460, 27, 3}}, {{11, 1}, {455, 23, 0}},
    {{11, 0}, {450, 51, 5}},  {{10, 2}, {440, 33, 0}}, {{10, 1}, {418, 39, 0}},
    {{10, 0}, {410, 48, 0}},  {{9, 2}, {396, 26, 0}},  {{9, 1}, {390, 46, 0}},
    {{9, 0}, {384, 81, 0}},   {{8, 0}, {367, 48, 0}},  {{7, 5}, {352, 31, 0}},
    {{7, 0}, {346, 46, 0}},
}};

}  // namespace

std::string CudaVersion::str() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

CudaVersion CudaVersion::parse(std::string_view text) {
  const auto f = parse_dotted<2>(text, 1);
  if (!f || (*f)[0] == 0) {
    throw std::invalid_argument("'" + std::string(text) +
                                "' is not a CUDA version; expected MAJOR.MINOR such as 12.4");
  }
  return CudaVersion{(*f)[0], (*f)[1]};
}

DriverVersion parse_driver_version(std::string_view text) {
  const auto v = try_driver_version(text);
  if (!v) {
    throw std::invalid_argument("'" + std::string(text) +
                                "' is not an NVIDIA driver version; expected a form such as "
                                "525.85.12");
  }
  return *v;
}

std::optional<CudaVersion> max_cuda_for_driver(const DriverVersion& driver) {
  for (const auto& row : kToolkitMinimums) {
    if (driver >= row.driver) return row.cuda;
  }
  return std::nullopt;
}

std::optional<std::string> parse_proc_driver_version(std::string_view content) {
  std::istringstream lines{std::string(content)};
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("NVRM version:")) continue;
    // The version is the first dotted-number token; the words around it differ between the
    // proprietary and the open kernel module.
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      if (try_driver_version(word)) return word;
    }
  }
  return std::nullopt;
}

std::optional<DriverInfo> read_proc_driver(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream content;
  content << in.rdbuf();
  const auto version = parse_proc_driver_version(content.str());
  if (!version) {
    throw std::runtime_error(path.string() + " has no 'NVRM version:' line with a version");
  }
  const auto cuda = max_cuda_for_driver(parse_driver_version(*version));
  if (!cuda)
    throw std::runtime_error(path.string() + ": driver " + *version + " predates CUDA 7.0");
  return DriverInfo{*version, *cuda, path.string()};
}

std::optional<DriverInfo> read_driver(const std::filesystem::path& proc_path) {
  if (const auto nvml = query_nvml_driver(); nvml && nvml->cuda_driver_version > 0) {
    const int v = nvml->cuda_driver_version;
    return DriverInfo{nvml->driver_version, CudaVersion{v / 1000, (v % 1000) / 10}, "NVML"};
  }
  return read_proc_driver(proc_path);
}

void check_driver(std::string_view node, const std::optional<DriverInfo>& driver,
                  CudaVersion needed) {
  const std::string who = "node " + std::string(node);
  if (!driver) {
    throw DriverCheckError(who +
                           " has no NVIDIA driver loaded (neither NVML nor "
                           "/proc/driver/nvidia/version); this job needs CUDA " +
                           needed.str());
  }
  if (driver->max_cuda < needed) {
    throw DriverCheckError(who + " driver " + driver->version + " supports CUDA <= " +
                           driver->max_cuda.str() + "; this job needs " + needed.str());
  }
}

}  // namespace railyard
