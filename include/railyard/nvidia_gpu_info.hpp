#pragma once
// What the NVIDIA driver itself says about each GPU, in /proc/driver/nvidia/gpus/<PCI bus
// id>/information: the model name, the UUID and the device minor number (N of /dev/nvidiaN,
// which Slurm's gres.conf File= lines name). The file needs neither NVML nor the device
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
  int minor = -1;     // "Device Minor"; -1 when absent, malformed, out of range or repeated
};

// The largest minor a GPU may have: the driver's character major 195 keeps 254 and 255 for
// /dev/nvidia-modeset and /dev/nvidiactl.
inline constexpr int kMaxGpuMinor = 253;

// Parses the text of an `information` file ("Model: \t NVIDIA H200" lines). A value is kept
// only when it is printable ASCII of at most 128 characters; anything else leaves the field
// empty, since the text may be damaged. The minor must be decimal digits in 0..kMaxGpuMinor
// on exactly one "Device Minor" line: a second such line makes it unknown (-1).
NvidiaGpuInfo parse_nvidia_gpu_information(std::string_view text);

// Fills each GPU's empty name and uuid, and its unknown minor, from
// <gpus_dir>/<pci_bus_id>/information where that file exists; GPUs without one keep what hwloc
// gave. Reads at most 64 KiB per file. Whether the minors are usable (all known, all distinct)
// is gpu_numbering.hpp's question, not this one's.
void add_nvidia_driver_info(Topology& topology,
                            const std::filesystem::path& gpus_dir = "/proc/driver/nvidia/gpus");

}  // namespace railyard
