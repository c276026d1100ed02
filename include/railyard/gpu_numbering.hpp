#pragma once
// Which GPU Slurm means by a GPU index ("2" in SLURM_STEP_GPUS). Slurm numbers a node's GPUs by
// their place in its gres device list (gres_node_config_load in src/interfaces/gres.c); the
// index, not the device file's number, is what SLURM_*_GPUS and CUDA_VISIBLE_DEVICES carry
// (common_gres_set_env in src/plugins/gres/common/gres_common.c). With AutoDetect=nvml the list
// is sorted back into NVML's enumeration order, which is PCI bus order (_sort_gpu_by_links_order
// in src/plugins/gres/gpu/gres_gpu.c, Slurm >= 21.08); with gres.conf File= lines alone it is
// their order, /dev/nvidia0, /dev/nvidia1, ...: device minors, which the NVIDIA driver need not
// hand out in PCI bus order. Which one holds is a fact of gres.conf that the plugin cannot see,
// so the admin states it (plugstack.conf gpu_index=), and this maps the indices accordingly.

#include <optional>
#include <string>
#include <vector>

#include "railyard/policy.hpp"
#include "railyard/topology.hpp"

namespace railyard {

struct GpuNumbering {
  // The rule applied: kMinor only when asked for and every GPU has a known, distinct minor.
  GpuIndex rule = GpuIndex::kPci;
  std::vector<int> gpus;  // Slurm's index i -> index into Topology::gpus
  // Every minor is known and distinct, and ascending minors are not ascending PCI bus ids:
  // Slurm's indices then depend on gres.conf, and CUDA's PCI_BUS_ID numbers differ from them.
  bool minors_out_of_pci_order = false;
  // At most one: minors out of PCI bus order where the admin has not stated the rule (the two
  // orders, what to set), or why kMinor was asked for but not applied.
  std::vector<std::string> warnings;
};

// Maps Slurm's GPU indices onto `topology`'s GPUs by `wanted` (nullopt: kPci, not stated).
// kMinor takes the GPUs by ascending Gpu::minor, the order File=/dev/nvidia[0-N] lists them;
// where a minor is unknown or repeated it falls back to kPci, with a warning naming the GPU.
GpuNumbering number_gpus(const Topology& topology, std::optional<GpuIndex> wanted);

}  // namespace railyard
