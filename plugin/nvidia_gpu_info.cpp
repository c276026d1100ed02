// Model, UUID and device minor of each GPU from the NVIDIA driver's per-GPU /proc file.

#include "railyard/nvidia_gpu_info.hpp"

#include <algorithm>
#include <fstream>

namespace railyard {
namespace {

constexpr size_t kMaxValue = 128;
constexpr std::streamsize kMaxFile = 64 * 1024;

std::string_view trim(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

bool printable(std::string_view s) {
  return !s.empty() && s.size() <= kMaxValue &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
}

// A minor as the driver prints it: a few decimal digits in the GPU range; -1 otherwise.
int parse_minor(std::string_view s) {
  if (s.empty() || s.size() > 3 ||
      !std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  int value = 0;
  for (char c : s) value = value * 10 + (c - '0');
  return value <= kMaxGpuMinor ? value : -1;
}

}  // namespace

NvidiaGpuInfo parse_nvidia_gpu_information(std::string_view text) {
  NvidiaGpuInfo info;
  int minor_lines = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = trim(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    // Counted before the value is judged: a damaged second line still makes the minor doubtful.
    if (key == "Device Minor" && ++minor_lines == 1) info.minor = parse_minor(value);
    if (!printable(value)) continue;
    if (key == "Model" && info.model.empty()) info.model = value;
    if (key == "GPU UUID" && info.uuid.empty()) info.uuid = value;
  }
  if (minor_lines > 1) info.minor = -1;
  return info;
}

void add_nvidia_driver_info(Topology& topology, const std::filesystem::path& gpus_dir) {
  for (Gpu& gpu : topology.gpus) {
    if (!gpu.name.empty() && !gpu.uuid.empty() && gpu.minor >= 0) continue;
    std::ifstream in(gpus_dir / gpu.pci_bus_id / "information", std::ios::binary);
    if (!in) continue;
    std::string text(static_cast<size_t>(kMaxFile), '\0');
    in.read(text.data(), kMaxFile);
    text.resize(static_cast<size_t>(in.gcount()));
    const NvidiaGpuInfo info = parse_nvidia_gpu_information(text);
    if (gpu.name.empty()) gpu.name = info.model;
    if (gpu.uuid.empty() && info.uuid.starts_with("GPU-")) gpu.uuid = info.uuid;
    if (gpu.minor < 0) gpu.minor = info.minor;
  }
}

}  // namespace railyard
