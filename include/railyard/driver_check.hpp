#pragma once
// The driver check: does this node's NVIDIA driver support the CUDA version a job needs?
// Answered before any GPU time is spent. The driver is asked through NVML (opened with dlopen,
// so nodes without a driver still load the plugin); without NVML, the kernel module's version
// file and NVIDIA's table of minimum drivers per CUDA toolkit give the answer.

#include <compare>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace railyard {

// A CUDA version as MAJOR.MINOR: what a job needs, or the newest a driver supports.
struct CudaVersion {
  int major = 0;
  int minor = 0;
  auto operator<=>(const CudaVersion&) const = default;
  std::string str() const;  // "12.4"
  // Parses "12.4" or "12" (= 12.0). Throws std::invalid_argument naming the value and the
  // expected form otherwise.
  static CudaVersion parse(std::string_view text);
};

// A driver version such as 525.85.12 (two or three numeric fields; a missing one is 0).
struct DriverVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  auto operator<=>(const DriverVersion&) const = default;
};

// Parses "525.85.12" or "570.26"; throws std::invalid_argument otherwise.
DriverVersion parse_driver_version(std::string_view text);

// The newest CUDA toolkit whose minimum Linux driver (NVIDIA's CUDA release notes,
// "CUDA Toolkit and Corresponding Driver Versions") is at most `driver`; nullopt for a driver
// older than CUDA 7.0's.
std::optional<CudaVersion> max_cuda_for_driver(const DriverVersion& driver);

// The driver version, as written, in the text of /proc/driver/nvidia/version
// ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  525.85.12  ..." gives "525.85.12");
// nullopt when the text has no such line or the line no version.
std::optional<std::string> parse_proc_driver_version(std::string_view content);

// What a node's driver is and the newest CUDA it supports.
struct DriverInfo {
  std::string version;  // "525.85.12"
  CudaVersion max_cuda;
  std::string source;  // "NVML" or the file it was read from
};

// The driver as the version file at `path` describes it (table lookup); nullopt when the file
// is absent (no driver loaded). Throws std::runtime_error when the file exists but cannot be
// understood. `path` is a parameter so tests can point it at a fixture; the plugin always
// passes the default.
std::optional<DriverInfo> read_proc_driver(
    const std::filesystem::path& path = "/proc/driver/nvidia/version");

// The node's driver: NVML first, then the version file at `proc_path`; nullopt when neither
// exists.
std::optional<DriverInfo> read_driver(
    const std::filesystem::path& proc_path = "/proc/driver/nvidia/version");

// Raised when a job's CUDA version cannot run on the node.
class DriverCheckError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws DriverCheckError when `driver` is absent or supports less than `needed`, with a
// message such as "node gpu07 driver 525.85.12 supports CUDA <= 12.0; this job needs 12.4".
void check_driver(std::string_view node, const std::optional<DriverInfo>& driver,
                  CudaVersion needed);

}  // namespace railyard
