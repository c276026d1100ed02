#pragma once
// Synthetic hwloc 2 XML fixtures for the topology and planner tests: a small builder for
// sockets, PCIe host bridges, switches and devices, and the nodes the tests share.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace railyard::testing {

class SyntheticNode {
 public:
  // A socket with `cpus` PUs (consecutive OS indices after the previous socket's) and one NUMA
  // node with the socket's index. Returns the socket index.
  int add_socket(int cpus) {
    sockets_.push_back({next_cpu_, cpus, {}});
    next_cpu_ += cpus;
    return static_cast<int>(sockets_.size()) - 1;
  }
  // A PCIe host bridge on a socket; returns its handle.
  int host_bridge(int socket) {
    const int id = add(Object(Kind::kHostBridge, -1));
    sockets_[socket].roots.push_back(id);
    return id;
  }
  // A PCIe host bridge hwloc knows no locality for (a VM's PCI bus, sysfs numa_node -1): it
  // hangs off the Machine object, after the sockets.
  int host_bridge_without_locality() {
    const int id = add(Object(Kind::kHostBridge, -1));
    loose_roots_.push_back(id);
    return id;
  }
  // A PCI-to-PCI bridge (a root port, or a switch's upstream or downstream port).
  int bridge(int parent) { return add(Object(Kind::kBridge, parent)); }
  // A PCIe switch: an upstream port under `parent`; downstream ports are bridge(switch).
  int pcie_switch(int parent) { return bridge(parent); }
  // A downstream port of `sw` with one device behind it; returns the port.
  int port(int sw) { return bridge(sw); }

  // A GPU with hwloc's CUDA OS device (its model) and, given a uuid, its NVML OS device; a
  // bare GPU has neither, as where hwloc lacks those components.
  void gpu(int parent, unsigned pci_class = 0x0302, const std::string& uuid = "",
           bool bare = false) {
    Object o(Kind::kGpu, parent);
    o.bare = bare;
    o.vendor = 0x10de;
    o.device = 0x2330;
    o.pci_class = pci_class;
    o.uuid = uuid;
    o.index = gpus_++;
    add(o);
  }
  void nic(int parent, const std::string& name, const std::string& netdev, unsigned vendor = 0x15b3,
           const std::string& port_state = "4") {
    Object o(Kind::kNic, parent);
    o.vendor = vendor;
    o.device = vendor == 0x15b3 ? 0x101e : 0xefa1;
    o.pci_class = vendor == 0x15b3 ? 0x0207 : 0x0200;
    o.name = name;
    o.netdev = netdev;
    o.port_state = port_state;
    add(o);
  }
  // Any other PCI device: a BMC's VGA controller (1a03:2000 class 0300), an NVSwitch
  // (10de class 0680), an Ethernet controller with a netdev.
  void device(int parent, unsigned vendor, unsigned device, unsigned pci_class,
              const std::string& netdev = "") {
    Object o(Kind::kDevice, parent);
    o.vendor = vendor;
    o.device = device;
    o.pci_class = pci_class;
    o.netdev = netdev;
    add(o);
  }

  std::string xml() {
    next_bus_ = 0;
    std::string out =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n";
    const std::string all_cpus = bitmap(0, next_cpu_);
    const std::string all_nodes = bitmap(0, static_cast<int>(sockets_.size()));
    out += "<object type=\"Machine\" os_index=\"0\"" + sets(all_cpus, all_nodes) + ">\n";
    for (size_t s = 0; s < sockets_.size(); ++s) {
      const Socket& socket = sockets_[s];
      const std::string cpus = bitmap(socket.first_cpu, socket.cpus);
      const std::string node = bitmap(static_cast<int>(s), 1);
      out += "<object type=\"Package\" os_index=\"" + std::to_string(s) + "\"" + sets(cpus, node) +
             ">\n";
      out += "<object type=\"NUMANode\" os_index=\"" + std::to_string(s) + "\"" + sets(cpus, node) +
             " local_memory=\"68719476736\"/>\n";
      for (int c = socket.first_cpu; c < socket.first_cpu + socket.cpus; ++c) {
        out += "<object type=\"PU\" os_index=\"" + std::to_string(c) + "\"" +
               sets(bitmap(c, 1), node) + "/>\n";
      }
      for (int root : socket.roots) out += emit(root, 0);
      out += "</object>\n";
    }
    for (int root : loose_roots_) out += emit(root, 0);
    out += "</object>\n</topology>\n";
    return out;
  }

  // Writes the XML to a fresh file in the test's temporary directory; returns its path. The pid
  // keeps test processes running side by side (ctest -j, sanitizer builds) off each other's files.
  std::string write(const std::string& stem) {
    const std::string path = ::testing::TempDir() + "/railyard-" + stem + "-" +
                             std::to_string(::getpid()) + "-" + std::to_string(counter()++) +
                             ".xml";
    std::ofstream(path) << xml();
    return path;
  }

 private:
  enum class Kind { kHostBridge, kBridge, kGpu, kNic, kDevice };
  struct Object {
    Object(Kind k, int p) : kind(k), parent(p) {}
    Kind kind;
    int parent;
    unsigned vendor = 0;
    unsigned device = 0;
    unsigned pci_class = 0;
    std::string name;
    std::string netdev;
    std::string uuid;
    std::string port_state;
    bool bare = false;
    int index = 0;
    std::vector<int> children;
  };
  struct Socket {
    int first_cpu;
    int cpus;
    std::vector<int> roots;
  };

  static int& counter() {
    static int n = 0;
    return n;
  }

  int add(Object o) {
    objects_.push_back(o);
    const int id = static_cast<int>(objects_.size()) - 1;
    if (o.parent >= 0) objects_[o.parent].children.push_back(id);
    return id;
  }

  // hwloc's bitmap text: 32-bit words, most significant first.
  static std::string bitmap(int first, int count) {
    const int last = first + count - 1;
    const int words = last / 32 + 1;
    std::string out;
    for (int w = words - 1; w >= 0; --w) {
      unsigned bits = 0;
      for (int b = 0; b < 32; ++b) {
        const int i = w * 32 + b;
        if (i >= first && i <= last) bits |= 1u << b;
      }
      char text[16];
      std::snprintf(text, sizeof text, "0x%08x", bits);
      out += (out.empty() ? "" : ",") + std::string(text);
    }
    return out;
  }

  static std::string sets(const std::string& cpus, const std::string& nodes) {
    return " cpuset=\"" + cpus + "\" complete_cpuset=\"" + cpus + "\" allowed_cpuset=\"" + cpus +
           "\" nodeset=\"" + nodes + "\" complete_nodeset=\"" + nodes + "\" allowed_nodeset=\"" +
           nodes + "\"";
  }

  static std::string hex(unsigned value, int digits) {
    char text[16];
    std::snprintf(text, sizeof text, "%0*x", digits, value);
    return text;
  }

  // Buses are numbered depth first, so devices created earlier sort first by bus id.
  std::string emit(int id, int bus, int slot = 0) {
    Object& o = objects_[id];
    const std::string busid = "0000:" + hex(bus, 2) + ":" + hex(slot, 2) + ".0";
    if (o.kind == Kind::kHostBridge || o.kind == Kind::kBridge) {
      const int secondary = o.kind == Kind::kHostBridge ? next_bus_ : ++next_bus_;
      std::string body;
      for (size_t c = 0; c < o.children.size(); ++c) {
        body += emit(o.children[c], secondary, static_cast<int>(c));
      }
      const std::string range =
          "0000:[" + hex(secondary, 2) + "-" + hex(std::max(next_bus_, secondary), 2) + "]";
      if (o.kind == Kind::kHostBridge) {
        ++next_bus_;
        return "<object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\" bridge_pci=\"" + range +
               "\">\n" + body + "</object>\n";
      }
      return "<object type=\"Bridge\" bridge_type=\"1-1\" depth=\"1\" bridge_pci=\"" + range +
             "\" pci_busid=\"" + busid + "\" pci_type=\"0604 [10b5:c010] [10b5:a064] 00\">\n" +
             body + "</object>\n";
    }
    std::string out = "<object type=\"PCIDev\" pci_busid=\"" + busid + "\" pci_type=\"" +
                      hex(o.pci_class, 4) + " [" + hex(o.vendor, 4) + ":" + hex(o.device, 4) +
                      "] [0000:0000] 00\">\n";
    if (o.kind == Kind::kGpu && !o.bare) {
      const std::string n = std::to_string(o.index);
      out += "<object type=\"OSDev\" name=\"cuda" + n +
             "\" subtype=\"CUDA\" osdev_type=\"5\"><info name=\"GPUModel\" "
             "value=\"NVIDIA H100 80GB HBM3\"/></object>\n";
      if (!o.uuid.empty()) {
        out += "<object type=\"OSDev\" name=\"nvml" + n +
               "\" osdev_type=\"1\"><info name=\"NVIDIAUUID\" value=\"" + o.uuid +
               "\"/></object>\n";
      }
    }
    if (!o.netdev.empty()) {
      out += "<object type=\"OSDev\" name=\"" + o.netdev +
             "\" osdev_type=\"2\"><info name=\"Port\" value=\"1\"/></object>\n";
    }
    if (o.kind == Kind::kNic) {
      out += "<object type=\"OSDev\" name=\"" + o.name + "\" osdev_type=\"3\">" +
             "<info name=\"Port1State\" value=\"" + o.port_state + "\"/></object>\n";
    }
    return out + "</object>\n";
  }

  std::vector<Socket> sockets_;
  std::vector<Object> objects_;
  std::vector<int> loose_roots_;
  int next_cpu_ = 0;
  int next_bus_ = 0;
  int gpus_ = 0;
};

// DGX-H100-like: 2 sockets of 16 cpus (0-15, 16-31), 8 GPUs and 8 NICs, each GPU/NIC pair
// behind its own PCIe switch. Per socket, host bridge A holds two pair switches under one
// upper switch (pairs across it are PXB), host bridge B holds two pair switches on separate
// root ports (PHB). NIC names are not in GPU order: GPU i's NIC is mlx5_{kDgxNicOfGpu[i]}.
inline constexpr int kDgxNicOfGpu[8] = {4, 7, 0, 3, 6, 1, 5, 2};

inline SyntheticNode dgx_h100() {
  SyntheticNode node;
  int gpu = 0;
  auto pair = [&](int parent) {
    const int sw = node.pcie_switch(parent);
    node.gpu(node.port(sw));
    const int nic = kDgxNicOfGpu[gpu++];
    node.nic(node.port(sw), "mlx5_" + std::to_string(nic), "ibp" + std::to_string(nic));
  };
  for (int s = 0; s < 2; ++s) {
    node.add_socket(16);
    const int a = node.host_bridge(s);
    const int upper = node.pcie_switch(node.bridge(a));
    pair(node.port(upper));
    pair(node.port(upper));
    const int b = node.host_bridge(s);
    pair(node.bridge(b));
    pair(node.bridge(b));
    if (s == 0) node.device(node.bridge(node.host_bridge(0)), 0x8086, 0x1521, 0x0200, "eno1");
  }
  return node;
}

}  // namespace railyard::testing
