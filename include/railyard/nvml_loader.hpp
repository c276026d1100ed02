#pragma once
// NVML, opened at run time: the plugin must load on nodes without an NVIDIA driver, so it never
// links libnvidia-ml; it dlopens libnvidia-ml.so.1 only when a job asks for a driver check.

#include <optional>
#include <string>

namespace railyard {

struct NvmlDriver {
  std::string driver_version;   // nvmlSystemGetDriverVersion, e.g. "550.54.14"
  int cuda_driver_version = 0;  // nvmlSystemGetCudaDriverVersion_v2, e.g. 12040 for 12.4
};

// The driver as NVML reports it; nullopt when libnvidia-ml.so.1 is absent or NVML cannot
// initialise (no driver loaded). Throws nothing.
std::optional<NvmlDriver> query_nvml_driver() noexcept;

}  // namespace railyard
