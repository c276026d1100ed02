#pragma once
// A node's hardware as the binding planner sees it: GPUs, RDMA NICs, network interfaces,
// NUMA nodes, and the PCIe distance class between every GPU and NIC. Loaded from hwloc (live,
// or from an hwloc XML file an admin cached). Plain data: the planner needs no hwloc handle.

#include <string>
#include <string_view>
#include <vector>

namespace railyard {

// How far apart a GPU and a NIC are, nearest first (the classes `nvidia-smi topo -m` shows).
enum class Distance {
  kPIX,   // behind the same PCIe switch (or bridge)
  kPXB,   // across several PCIe switches, without crossing a host bridge
  kPHB,   // under the same PCIe host bridge
  kNODE,  // different host bridges in the same NUMA node
  kSYS,   // different NUMA nodes (across the socket interconnect)
};

std::string_view to_string(Distance distance);  // "PIX", "PXB", ...

// An NVIDIA GPU: PCI vendor 10de with class 0300 (VGA) or 0302 (3D). Never a BMC's VGA.
struct Gpu {
  std::string pci_bus_id;  // "0000:03:00.0", lowercase hex
  unsigned vendor_id = 0;
  unsigned device_id = 0;
  std::string name;                    // model when hwloc knows it, else empty
  std::string uuid;                    // "GPU-..." when hwloc's NVML data has it, else empty
  std::vector<std::string> mig_uuids;  // "MIG-..." instances on this GPU, when known
  // The driver's device minor (N of /dev/nvidiaN) from /proc/driver/nvidia; -1 unknown (no
  // driver, an hwloc XML read elsewhere). Not always in PCI bus order (gpu_numbering.hpp).
  int minor = -1;
  int numa_node = -1;  // OS index of the nearest NUMA node; -1 unknown (no locality in hwloc)
  std::string cpuset;  // cpus local to the GPU, hwloc list string "0-15,32-47"
};

// An RDMA device (an OpenFabrics OS device: InfiniBand, RoCE, or AWS EFA).
struct Nic {
  std::string name;                  // RDMA device name, "mlx5_1"
  std::vector<unsigned> ports;       // usable ports (active ones where the state is known)
  std::vector<std::string> netdevs;  // network interfaces of the same PCI function, "ib1"
  std::string pci_bus_id;            // empty when hwloc has no PCI parent for it
  bool efa = false;                  // AWS EFA (PCI vendor 1d0f): no NCCL_IB_HCA / UCX use
  int numa_node = -1;
  std::string cpuset;
};

// A network interface (Ethernet, IPoIB) as hwloc lists it.
struct NetInterface {
  std::string name;        // "eth0", "ib0"
  std::string pci_bus_id;  // empty when not on PCI
  int numa_node = -1;
};

struct NumaNode {
  unsigned os_index = 0;
  std::string cpuset;
};

struct Topology {
  std::string source;  // the XML path, or "live"
  std::string cpuset;  // the node's allowed cpus
  // In PCI bus order: index i is CUDA's device i under CUDA_DEVICE_ORDER=PCI_BUS_ID (and
  // nvidia-smi's i). Slurm's GPU index i is this i, or the GPU of the i-th device minor,
  // depending on gres.conf: gpu_numbering.hpp maps one to the other.
  std::vector<Gpu> gpus;
  std::vector<Nic> nics;  // in RDMA device name order
  std::vector<NetInterface> interfaces;
  std::vector<NumaNode> numa_nodes;
  std::vector<std::vector<Distance>> gpu_nic;  // gpu_nic[gpu][nic]
};

// Loads an hwloc XML file (hwloc 1.x or 2.x format, e.g. from `lstopo --of xml`). Throws
// std::runtime_error naming the file when it cannot be read or parsed.
Topology load_topology_xml(const std::string& path);

// Discovers this machine with hwloc, PCI and OS devices included; GPU names and UUIDs that hwloc
// lacks come from the NVIDIA driver (nvidia_gpu_info.hpp). Throws std::runtime_error.
Topology discover_topology();

}  // namespace railyard
