// Reads a node's topology out of hwloc (live or XML) into plain data, and classifies the PCIe
// path between every GPU and NIC.

#include "railyard/topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>

#include "railyard/nvidia_gpu_info.hpp"

namespace railyard {
namespace {

constexpr unsigned kNvidiaVendor = 0x10de;
constexpr unsigned kAmazonVendor = 0x1d0f;  // EFA
constexpr unsigned kClassVga = 0x0300;
constexpr unsigned kClass3d = 0x0302;

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

// Locality is the hardware's, not the caller's: slurmstepd may run inside a step's cpuset
// cgroup, which would otherwise hide the cpus and NUMA nodes of GPUs outside it. Only
// Topology::cpuset is the allowed set. (An XML file is never treated as this system.)
TopologyHandle make_handle(const std::string& what) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    throw std::runtime_error("railyard: cannot initialise hwloc for " + what + ": " +
                             std::strerror(errno));
  }
  TopologyHandle topo(raw);
  hwloc_topology_set_flags(raw, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  return topo;
}

std::string list_string(hwloc_const_bitmap_t bits) {
  if (bits == nullptr || hwloc_bitmap_iszero(bits)) return "";
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, bits) < 0 || text == nullptr) return "";
  std::string out(text);
  std::free(text);
  return out;
}

std::string pci_bus_id(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%01x", static_cast<unsigned>(a.domain),
                static_cast<unsigned>(a.bus), static_cast<unsigned>(a.dev),
                static_cast<unsigned>(a.func));
  return text;
}

const char* info(hwloc_obj_t obj, const char* name) {
  return obj == nullptr ? nullptr : hwloc_obj_get_info_by_name(obj, name);
}

// The normal (CPU-side) object an I/O object hangs off: its cpuset is the device's locality.
hwloc_obj_t locality(hwloc_topology_t topo, hwloc_obj_t obj) {
  return hwloc_get_non_io_ancestor_obj(topo, obj);
}

// A device hwloc knows no locality for (a VM's PCI bus, sysfs numa_node -1, an XML without
// locality) hangs off the root object: its NUMA node is unknown, not the machine's first one.
int numa_of(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t local = locality(topo, obj);
  if (local == nullptr || local->nodeset == nullptr || local == hwloc_get_root_obj(topo)) {
    return -1;
  }
  return hwloc_bitmap_first(local->nodeset);
}

std::string cpuset_of(hwloc_topology_t topo, hwloc_obj_t obj) {
  hwloc_obj_t local = locality(topo, obj);
  return local == nullptr ? "" : list_string(local->cpuset);
}

hwloc_obj_t pci_parent(hwloc_obj_t osdev) {
  hwloc_obj_t parent = osdev->parent;
  return parent != nullptr && parent->type == HWLOC_OBJ_PCI_DEVICE ? parent : nullptr;
}

bool is_ancestor(hwloc_obj_t maybe_ancestor, hwloc_obj_t obj) {
  for (hwloc_obj_t p = obj->parent; p != nullptr; p = p->parent) {
    if (p == maybe_ancestor) return true;
  }
  return false;
}

bool is_host_bridge(hwloc_obj_t obj) {
  return obj->type == HWLOC_OBJ_BRIDGE && obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

// The nvidia-smi classes from the PCI tree: the lowest bridge above both devices decides.
// A PCIe switch appears in hwloc as an upstream-port bridge over downstream-port bridges, so
// two devices whose paths meet with at most one bridge between each and the meeting point sit
// behind one switch (PIX); deeper paths cross several switches (PXB).
Distance classify(hwloc_topology_t topo, hwloc_obj_t a, hwloc_obj_t b) {
  if (a != nullptr && b != nullptr) {
    int hops_a = 0;
    for (hwloc_obj_t p = a->parent; p != nullptr && p->type == HWLOC_OBJ_BRIDGE;
         p = p->parent, ++hops_a) {
      if (!is_ancestor(p, b)) continue;
      if (is_host_bridge(p)) return Distance::kPHB;
      int hops_b = 0;
      for (hwloc_obj_t q = b->parent; q != p; q = q->parent) ++hops_b;
      return std::max(hops_a, hops_b) <= 1 ? Distance::kPIX : Distance::kPXB;
    }
  }
  hwloc_obj_t la = a == nullptr ? nullptr : locality(topo, a);
  hwloc_obj_t lb = b == nullptr ? nullptr : locality(topo, b);
  if (la != nullptr && lb != nullptr && la->nodeset != nullptr && lb->nodeset != nullptr &&
      hwloc_bitmap_intersects(la->nodeset, lb->nodeset)) {
    return Distance::kNODE;
  }
  return Distance::kSYS;
}

// "mlx5_10" after "mlx5_9": digits compare as numbers.
bool natural_less(const std::string& x, const std::string& y) {
  size_t i = 0;
  size_t j = 0;
  while (i < x.size() && j < y.size()) {
    if (std::isdigit(static_cast<unsigned char>(x[i])) &&
        std::isdigit(static_cast<unsigned char>(y[j]))) {
      size_t ie = i;
      size_t je = j;
      while (ie < x.size() && std::isdigit(static_cast<unsigned char>(x[ie]))) ++ie;
      while (je < y.size() && std::isdigit(static_cast<unsigned char>(y[je]))) ++je;
      const unsigned long nx = std::stoul(x.substr(i, std::min<size_t>(ie - i, 18)));
      const unsigned long ny = std::stoul(y.substr(j, std::min<size_t>(je - j, 18)));
      if (nx != ny) return nx < ny;
      i = ie;
      j = je;
    } else {
      if (x[i] != y[j]) return x[i] < y[j];
      ++i;
      ++j;
    }
  }
  return x.size() - i < y.size() - j;
}

// Ports from hwloc's "Port<N>State" infos; active ones (state 4) when any is active. Without
// state data, port 1, which every RDMA device has.
std::vector<unsigned> ports_of(hwloc_obj_t osdev) {
  std::vector<unsigned> all;
  std::vector<unsigned> active;
  for (unsigned i = 0; i < osdev->infos_count; ++i) {
    unsigned port = 0;
    char tail[16] = {0};
    if (std::sscanf(osdev->infos[i].name, "Port%u%15s", &port, tail) == 2 &&
        std::strcmp(tail, "State") == 0) {
      all.push_back(port);
      if (std::strcmp(osdev->infos[i].value, "4") == 0) active.push_back(port);
    }
  }
  std::vector<unsigned>& chosen = active.empty() ? all : active;
  if (chosen.empty()) chosen.push_back(1);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

// NVIDIA display and 3D functions in PCI bus order: the GPU order every caller indexes by.
std::vector<hwloc_obj_t> gpu_objects(hwloc_topology_t topo) {
  std::vector<hwloc_obj_t> gpu_objs;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(topo, pci)) {
    const auto& a = pci->attr->pcidev;
    if (a.vendor_id == kNvidiaVendor && (a.class_id == kClassVga || a.class_id == kClass3d)) {
      gpu_objs.push_back(pci);
    }
  }
  auto bus_key = [](hwloc_obj_t o) {
    const auto& a = o->attr->pcidev;
    return std::make_tuple(a.domain, a.bus, a.dev, a.func);
  };
  std::sort(gpu_objs.begin(), gpu_objs.end(),
            [&](hwloc_obj_t x, hwloc_obj_t y) { return bus_key(x) < bus_key(y); });
  return gpu_objs;
}

// The model name and UUID come from the GPU's OS device; the PCI name is the fallback.
Gpu read_gpu(hwloc_topology_t topo, hwloc_obj_t pci) {
  Gpu g;
  g.pci_bus_id = pci_bus_id(pci);
  g.vendor_id = pci->attr->pcidev.vendor_id;
  g.device_id = pci->attr->pcidev.device_id;
  for (hwloc_obj_t child = pci->io_first_child; child != nullptr; child = child->next_sibling) {
    if (child->type != HWLOC_OBJ_OS_DEVICE) continue;
    if (g.name.empty() && info(child, "GPUModel") != nullptr) g.name = info(child, "GPUModel");
    if (g.uuid.empty() && info(child, "NVIDIAUUID") != nullptr) {
      g.uuid = info(child, "NVIDIAUUID");
    }
  }
  if (g.name.empty() && info(pci, "PCIDevice") != nullptr) g.name = info(pci, "PCIDevice");
  g.numa_node = numa_of(topo, pci);
  g.cpuset = cpuset_of(topo, pci);
  return g;
}

// A GPU listed twice (same bus id or UUID) only comes from a damaged or edited XML file.
void check_not_listed(const std::vector<Gpu>& gpus, const Gpu& g, const std::string& source) {
  for (const Gpu& other : gpus) {
    if (other.pci_bus_id == g.pci_bus_id || (!g.uuid.empty() && other.uuid == g.uuid)) {
      throw std::runtime_error("railyard: topology " + source + " lists GPU " + g.pci_bus_id +
                               (g.uuid.empty() ? "" : " (" + g.uuid + ")") +
                               " twice: a damaged or edited file; regenerate it with "
                               "lstopo --of xml");
    }
  }
}

std::vector<NetInterface> read_interfaces(hwloc_topology_t topo) {
  std::vector<NetInterface> interfaces;
  for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(topo, os)) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK || os->name == nullptr) continue;
    NetInterface n;
    n.name = os->name;
    hwloc_obj_t pci = pci_parent(os);
    if (pci != nullptr) n.pci_bus_id = pci_bus_id(pci);
    n.numa_node = numa_of(topo, os);
    interfaces.push_back(std::move(n));
  }
  return interfaces;
}

// The netdevs of a NIC's PCI function: the one tied to the first usable port first, then the
// function's other netdevs.
std::vector<std::string> netdevs_of(hwloc_obj_t pci, unsigned first_port) {
  std::vector<std::string> netdevs;
  for (int pass = 0; pass < 2; ++pass) {
    for (hwloc_obj_t sib = pci->io_first_child; sib != nullptr; sib = sib->next_sibling) {
      if (sib->type != HWLOC_OBJ_OS_DEVICE || sib->attr->osdev.type != HWLOC_OBJ_OSDEV_NETWORK ||
          sib->name == nullptr) {
        continue;
      }
      const char* port = info(sib, "Port");
      const bool on_port = port == nullptr || std::strtoul(port, nullptr, 10) == first_port;
      if (on_port == (pass == 0)) netdevs.emplace_back(sib->name);
    }
  }
  return netdevs;
}

Nic read_nic(hwloc_topology_t topo, hwloc_obj_t os, hwloc_obj_t pci) {
  Nic nic;
  nic.name = os->name;
  nic.ports = ports_of(os);
  if (pci != nullptr) {
    nic.pci_bus_id = pci_bus_id(pci);
    nic.efa = pci->attr->pcidev.vendor_id == kAmazonVendor;
    nic.netdevs = netdevs_of(pci, nic.ports[0]);
  }
  nic.numa_node = numa_of(topo, os);
  nic.cpuset = cpuset_of(topo, os);
  return nic;
}

// RDMA devices in natural name order, each with the object its PCIe path is measured from:
// its PCI function, or the OS device itself when hwloc knows no PCI parent.
std::vector<std::pair<Nic, hwloc_obj_t>> read_nics(hwloc_topology_t topo) {
  std::vector<std::pair<Nic, hwloc_obj_t>> nics;
  for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(topo, os)) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || os->name == nullptr) continue;
    hwloc_obj_t pci = pci_parent(os);
    nics.emplace_back(read_nic(topo, os, pci), pci != nullptr ? pci : os);
  }
  std::sort(nics.begin(), nics.end(),
            [](const auto& x, const auto& y) { return natural_less(x.first.name, y.first.name); });
  return nics;
}

std::vector<NumaNode> read_numa_nodes(hwloc_topology_t topo) {
  std::vector<NumaNode> nodes;
  for (hwloc_obj_t numa = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr);
       numa != nullptr; numa = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, numa)) {
    nodes.push_back(NumaNode{numa->os_index, list_string(numa->cpuset)});
  }
  return nodes;
}

// gpu_nic[gpu][nic]; a NIC without a PCI function is only placed by its NUMA locality.
std::vector<std::vector<Distance>> gpu_nic_distances(
    hwloc_topology_t topo, const std::vector<hwloc_obj_t>& gpu_objs,
    const std::vector<std::pair<Nic, hwloc_obj_t>>& nics) {
  std::vector<std::vector<Distance>> gpu_nic(gpu_objs.size());
  for (size_t g = 0; g < gpu_objs.size(); ++g) {
    for (const auto& [nic, obj] : nics) {
      const bool on_pci = obj->type == HWLOC_OBJ_PCI_DEVICE;
      gpu_nic[g].push_back(on_pci ? classify(topo, gpu_objs[g], obj)
                                  : classify(topo, gpu_objs[g], nullptr));
    }
  }
  return gpu_nic;
}

Topology read(hwloc_topology_t topo, const std::string& source) {
  Topology t;
  t.source = source;
  t.cpuset = list_string(hwloc_topology_get_allowed_cpuset(topo));
  const std::vector<hwloc_obj_t> gpu_objs = gpu_objects(topo);
  for (hwloc_obj_t pci : gpu_objs) {
    Gpu g = read_gpu(topo, pci);
    check_not_listed(t.gpus, g, source);
    t.gpus.push_back(std::move(g));
  }
  t.interfaces = read_interfaces(topo);
  std::vector<std::pair<Nic, hwloc_obj_t>> nics = read_nics(topo);
  t.numa_nodes = read_numa_nodes(topo);
  t.gpu_nic = gpu_nic_distances(topo, gpu_objs, nics);
  for (auto& entry : nics) t.nics.push_back(std::move(entry.first));
  return t;
}

}  // namespace

std::string_view to_string(Distance distance) {
  switch (distance) {
    case Distance::kPIX:
      return "PIX";
    case Distance::kPXB:
      return "PXB";
    case Distance::kPHB:
      return "PHB";
    case Distance::kNODE:
      return "NODE";
    case Distance::kSYS:
      return "SYS";
  }
  return "SYS";
}

Topology load_topology_xml(const std::string& path) {
  if (!std::ifstream(path).good()) {
    throw std::runtime_error("railyard: cannot read topology XML '" + path +
                             "': " + std::strerror(errno));
  }
  TopologyHandle topo = make_handle("'" + path + "'");
  // Keep every bridge: the distance classes need the whole PCI tree the file describes.
  hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_set_xml(topo.get(), path.c_str()) != 0) {
    throw std::runtime_error("railyard: topology XML '" + path +
                             "' is not a valid hwloc XML file (make one with lstopo --of xml)");
  }
  if (hwloc_topology_load(topo.get()) != 0) {
    throw std::runtime_error("railyard: topology XML '" + path +
                             "' is not a valid hwloc XML file (make one with lstopo --of xml)");
  }
  return read(topo.get(), path);
}

Topology discover_topology() {
  TopologyHandle topo = make_handle("this machine");
  hwloc_topology_set_io_types_filter(topo.get(), HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Linux's sysfs discovery finds the PCI tree and OS devices by itself. The libpciaccess
  // component only adds device names (and leaks), OpenCL and GL open an ICD loader or a display
  // inside slurmstepd; none of them changes a plan. CUDA/NVML, where hwloc has them, stay.
  for (const char* component : {"pci", "opencl", "gl"}) {
    hwloc_topology_set_components(topo.get(), HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, component);
  }
  if (hwloc_topology_load(topo.get()) != 0) {
    throw std::runtime_error(std::string("railyard: hwloc cannot discover this machine: ") +
                             std::strerror(errno));
  }
  Topology t = read(topo.get(), "live");
  // hwloc names a GPU only through its NVML or CUDA component; the driver always can.
  add_nvidia_driver_info(t);
  return t;
}

}  // namespace railyard
