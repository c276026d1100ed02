// Slurm's GPU index -> the topology's GPU, by PCI bus order or by device minor.

#include "railyard/gpu_numbering.hpp"

#include <algorithm>
#include <numeric>

namespace railyard {
namespace {

// Why the minors cannot order the GPUs, or empty when they can.
std::string minor_problem(const Topology& topology) {
  for (size_t i = 0; i < topology.gpus.size(); ++i) {
    const Gpu& g = topology.gpus[i];
    if (g.minor < 0) {
      return "GPU " + g.pci_bus_id +
             " has no known device minor (no valid 'Device Minor' line in " +
             "/proc/driver/nvidia/gpus/" + g.pci_bus_id + "/information)";
    }
    for (size_t j = 0; j < i; ++j) {
      if (topology.gpus[j].minor == g.minor) {
        return "GPUs " + topology.gpus[j].pci_bus_id + " and " + g.pci_bus_id +
               " both report device minor " + std::to_string(g.minor) + " (damaged driver data)";
      }
    }
  }
  return "";
}

std::string orders_warning(const Topology& topology, const std::vector<int>& by_minor) {
  std::string pairs;
  for (int g : by_minor) {
    const Gpu& gpu = topology.gpus[g];
    pairs += (pairs.empty() ? "" : ", ") + std::string("/dev/nvidia") + std::to_string(gpu.minor) +
             "=" + gpu.pci_bus_id;
  }
  return "this node's GPU device minors are not in PCI bus order (" + pairs +
         "): Slurm numbers GPUs in PCI bus order with gres.conf AutoDetect=nvml, and in File= "
         "order (/dev/nvidia0, 1, ...) without it. The plugin reads them in PCI bus order; "
         "state the rule of this node's gres.conf in plugstack.conf (gpu_index=pci or "
         "gpu_index=minor), which also ends this warning";
}

}  // namespace

GpuNumbering number_gpus(const Topology& topology, std::optional<GpuIndex> wanted) {
  GpuNumbering out;
  out.gpus.resize(topology.gpus.size());
  std::iota(out.gpus.begin(), out.gpus.end(), 0);
  if (topology.gpus.empty()) return out;
  const std::string problem = minor_problem(topology);
  if (!problem.empty()) {
    if (wanted == GpuIndex::kMinor) {
      out.warnings.push_back("gpu_index=minor, but " + problem +
                             ": Slurm's GPU indices are read in PCI bus order instead, which "
                             "binds tasks to the wrong GPUs if gres.conf's File= order differs");
    }
    return out;
  }
  std::vector<int> by_minor = out.gpus;
  std::sort(by_minor.begin(), by_minor.end(),
            [&](int x, int y) { return topology.gpus[x].minor < topology.gpus[y].minor; });
  // Topology::gpus is in PCI bus order, so the identity means the two orders agree.
  out.minors_out_of_pci_order = by_minor != out.gpus;
  if (wanted == GpuIndex::kMinor) {
    out.rule = GpuIndex::kMinor;
    out.gpus = by_minor;
  }
  if (out.minors_out_of_pci_order && !wanted) {
    out.warnings.push_back(orders_warning(topology, by_minor));
  }
  return out;
}

}  // namespace railyard
