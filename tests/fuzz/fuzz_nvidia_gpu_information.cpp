// Fuzzes the parser of the NVIDIA driver's /proc/driver/nvidia/gpus/<bus id>/information text
// (read by slurmstepd as root, so a damaged file must not crash it or yield odd values). The
// input is a whole file. Whatever is kept is printable ASCII of at most 128 characters, and a
// minor is -1 or a GPU minor.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "railyard/nvidia_gpu_info.hpp"

namespace {

void require(bool condition) {
  if (!condition) __builtin_trap();
}

void require_printable(const std::string& value) {
  require(value.size() <= 128);
  for (unsigned char c : value) require(c >= 0x20 && c < 0x7f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const railyard::NvidiaGpuInfo info = railyard::parse_nvidia_gpu_information(text);
  require_printable(info.model);
  require_printable(info.uuid);
  require(info.minor >= -1 && info.minor <= railyard::kMaxGpuMinor);
  // Text after the last newline is a line of its own: cutting the file there may lose a value
  // but never invent a minor.
  const size_t cut = text.rfind('\n');
  if (cut != std::string_view::npos && info.minor < 0) {
    require(railyard::parse_nvidia_gpu_information(text.substr(0, cut)).minor < 0 ||
            text.substr(cut).find("Device Minor") != std::string_view::npos);
  }
  return 0;
}
