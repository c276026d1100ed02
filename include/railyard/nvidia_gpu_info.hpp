#pragma once
// What the NVIDIA driver itself says about each GPU, in /proc/driver/nvidia/gpus/<PCI bus
// id>/information: the model name and the UUID. The file needs neither NVML nor the device
// file, so it names GPUs where hwloc has no NVML/CUDA OS device under the PCI device (hwloc
// built without those components, a GPU that the step's device cgroup hides from slurmstepd,
// an OS device that hwloc attached elsewhere).

#include <filesystem>
#include <string>
#include <string_view>

#include "railyard/topology.hpp"

namespace railyard {

struct NvidiaGpuInfo {
  std::string model;  // "NVIDIA H200"; empty when the text has none
  std::string uuid;   // "GPU-8c6a..."; empty when the text has none
};

// Parses the text of an `information` file ("Model: \t NVIDIA H200" lines). A value is kept
// only when it is printable ASCII of at most 128 characters; anything else leaves the field
// empty, since the text may be damaged.
NvidiaGpuInfo parse_nvidia_gpu_information(std::string_view text);

// Fills each GPU's empty name and uuid from <gpus_dir>/<pci_bus_id>/information where that
// file exists; GPUs without one keep what hwloc gave. Reads at most 64 KiB per file.
void add_nvidia_driver_info(Topology& topology,
                            const std::filesystem::path& gpus_dir = "/proc/driver/nvidia/gpus");

}  // namespace railyard
