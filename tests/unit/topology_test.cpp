// Topology discovery from synthetic hwloc XML: which PCI devices are GPUs, NIC ports and
// netdevs, locality, and the GPU-by-NIC distance classes.

#include "railyard/topology.hpp"

#include <gtest/gtest.h>
#include <hwloc.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "synthetic_topology.hpp"

namespace railyard {
namespace {

using testing::SyntheticNode;

int nic_index(const Topology& t, const std::string& name) {
  for (size_t i = 0; i < t.nics.size(); ++i) {
    if (t.nics[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no NIC " << name;
  return 0;
}

Distance between(const Topology& t, int gpu, int nic) {
  return t.gpu_nic[gpu][nic_index(t, "mlx5_" + std::to_string(nic))];
}

TEST(Topology, DgxGpusInPciOrderWithTheirSocketsCpus) {
  SyntheticNode node = testing::dgx_h100();
  const Topology t = load_topology_xml(node.write("dgx"));
  ASSERT_EQ(t.gpus.size(), 8u);
  for (size_t i = 1; i < t.gpus.size(); ++i)
    EXPECT_LT(t.gpus[i - 1].pci_bus_id, t.gpus[i].pci_bus_id);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(t.gpus[i].vendor_id, 0x10deu);
    EXPECT_EQ(t.gpus[i].numa_node, i < 4 ? 0 : 1);
    EXPECT_EQ(t.gpus[i].cpuset, i < 4 ? "0-15" : "16-31");
    EXPECT_EQ(t.gpus[i].name, "NVIDIA H100 80GB HBM3");
  }
  EXPECT_EQ(t.cpuset, "0-31");
  ASSERT_EQ(t.numa_nodes.size(), 2u);
  EXPECT_EQ(t.numa_nodes[1].os_index, 1u);
  EXPECT_EQ(t.numa_nodes[1].cpuset, "16-31");
}

TEST(Topology, DgxNicsSortedByNameWithPortsAndNetdevs) {
  SyntheticNode node = testing::dgx_h100();
  const Topology t = load_topology_xml(node.write("dgx"));
  ASSERT_EQ(t.nics.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(t.nics[i].name, "mlx5_" + std::to_string(i));
    EXPECT_EQ(t.nics[i].ports, std::vector<unsigned>{1});
    EXPECT_EQ(t.nics[i].netdevs, std::vector<std::string>{"ibp" + std::to_string(i)});
    EXPECT_FALSE(t.nics[i].efa);
  }
  EXPECT_EQ(t.nics[4].numa_node, 0);   // mlx5_4 pairs with GPU 0
  EXPECT_EQ(t.interfaces.size(), 9u);  // 8 IPoIB + eno1
}

TEST(Topology, DgxDistanceClassesFollowThePciTree) {
  SyntheticNode node = testing::dgx_h100();
  const Topology t = load_topology_xml(node.write("dgx"));
  ASSERT_EQ(t.gpu_nic.size(), 8u);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(between(t, g, testing::kDgxNicOfGpu[g]), Distance::kPIX);
  // GPU 0 and 1 share an upper switch; GPU 2 and 3 only a host bridge; 0 and 2 a NUMA node.
  EXPECT_EQ(between(t, 0, testing::kDgxNicOfGpu[1]), Distance::kPXB);
  EXPECT_EQ(between(t, 2, testing::kDgxNicOfGpu[3]), Distance::kPHB);
  EXPECT_EQ(between(t, 0, testing::kDgxNicOfGpu[2]), Distance::kNODE);
  EXPECT_EQ(between(t, 0, testing::kDgxNicOfGpu[5]), Distance::kSYS);
  EXPECT_EQ(between(t, 7, testing::kDgxNicOfGpu[0]), Distance::kSYS);
}

TEST(Topology, BmcVgaAndNvswitchAreNotGpus) {
  SyntheticNode node;
  node.add_socket(8);
  const int hb = node.host_bridge(0);
  node.device(node.bridge(node.bridge(hb)), 0x1a03, 0x2000, 0x0300);  // ASPEED BMC
  node.device(node.bridge(hb), 0x10de, 0x22a3, 0x0680);               // NVSwitch
  node.gpu(node.bridge(hb), 0x0300);                                  // a GPU in VGA class
  node.gpu(node.bridge(hb), 0x0302);
  const Topology t = load_topology_xml(node.write("bmc"));
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[0].vendor_id, 0x10deu);
  EXPECT_EQ(t.gpus[1].vendor_id, 0x10deu);
  EXPECT_TRUE(t.nics.empty());
  EXPECT_TRUE(t.gpu_nic[0].empty());
}

TEST(Topology, GpuLessNodeHasNicsAndNoMatrix) {
  SyntheticNode node;
  node.add_socket(4);
  node.add_socket(4);
  node.nic(node.bridge(node.host_bridge(0)), "mlx5_0", "ib0");
  node.nic(node.bridge(node.host_bridge(1)), "mlx5_1", "ib1");
  const Topology t = load_topology_xml(node.write("cpu"));
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_TRUE(t.gpu_nic.empty());
  ASSERT_EQ(t.nics.size(), 2u);
  EXPECT_EQ(t.nics[1].numa_node, 1);
  EXPECT_EQ(t.nics[1].cpuset, "4-7");
}

TEST(Topology, NicNamesSortNumericallyAndEfaIsRecognised) {
  SyntheticNode node;
  node.add_socket(4);
  const int hb = node.host_bridge(0);
  node.nic(node.bridge(hb), "mlx5_10", "ib10");
  node.nic(node.bridge(hb), "mlx5_2", "ib2", 0x15b3, "1");  // port down: still port 1
  node.nic(node.bridge(hb), "rdmap0s6", "", 0x1d0f);
  const Topology t = load_topology_xml(node.write("names"));
  ASSERT_EQ(t.nics.size(), 3u);
  EXPECT_EQ(t.nics[0].name, "mlx5_2");
  EXPECT_EQ(t.nics[1].name, "mlx5_10");
  EXPECT_EQ(t.nics[0].ports, std::vector<unsigned>{1});
  EXPECT_TRUE(t.nics[2].efa);
  EXPECT_TRUE(t.nics[2].netdevs.empty());
}

TEST(Topology, UuidComesFromNvmlData) {
  SyntheticNode node;
  node.add_socket(4);
  node.gpu(node.bridge(node.host_bridge(0)), 0x0302, "GPU-0123abcd-0000-1111-2222-333344445555");
  const Topology t = load_topology_xml(node.write("uuid"));
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].uuid, "GPU-0123abcd-0000-1111-2222-333344445555");
}

// hwloc hangs a device it knows no locality for off the Machine object; its NUMA node is then
// unknown (-1, "NUMA ?"), never the machine's first, and its cpus are the machine's.
TEST(Topology, DeviceWithoutLocalityHasUnknownNuma) {
  SyntheticNode node;
  node.add_socket(8);
  node.add_socket(8);
  node.gpu(node.bridge(node.host_bridge(0)));
  node.gpu(node.bridge(node.host_bridge(1)));
  const int loose = node.bridge(node.host_bridge_without_locality());
  node.gpu(loose);
  node.nic(loose, "mlx5_0", "ib0");
  const Topology t = load_topology_xml(node.write("no-locality"));
  ASSERT_EQ(t.gpus.size(), 3u);
  EXPECT_EQ(t.gpus[0].numa_node, 0);
  EXPECT_EQ(t.gpus[1].numa_node, 1);
  EXPECT_EQ(t.gpus[2].numa_node, -1);
  EXPECT_EQ(t.gpus[2].cpuset, "0-15");
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].numa_node, -1);
  ASSERT_EQ(t.interfaces.size(), 1u);
  EXPECT_EQ(t.interfaces[0].numa_node, -1);
}

// A single-socket VM (the GPU machine): the only NUMA node is not claimed for a device whose
// PCI bus has no locality.
TEST(Topology, OneSocketDeviceWithoutLocalityHasUnknownNuma) {
  SyntheticNode node;
  node.add_socket(16);
  node.gpu(node.bridge(node.host_bridge_without_locality()));
  const Topology t = load_topology_xml(node.write("vm"));
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].numa_node, -1);
  EXPECT_EQ(t.gpus[0].cpuset, "0-15");
  EXPECT_EQ(t.gpus[0].name, "NVIDIA H100 80GB HBM3");
}

// Without hwloc's NVML/CUDA OS devices a GPU has no name from hwloc.
TEST(Topology, BareGpuHasNoNameFromHwloc) {
  SyntheticNode node;
  node.add_socket(4);
  node.gpu(node.bridge(node.host_bridge(0)), 0x0302, "", /*bare=*/true);
  const Topology t = load_topology_xml(node.write("bare"));
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].name, "");
  EXPECT_EQ(t.gpus[0].uuid, "");
  EXPECT_EQ(t.gpus[0].numa_node, 0);
}

TEST(Topology, AGpuListedTwiceIsAnError) {
  const std::string uuid = "GPU-0123abcd-0000-1111-2222-333344445555";
  SyntheticNode node;
  node.add_socket(4);
  node.gpu(node.bridge(node.host_bridge(0)), 0x0302, uuid);
  node.gpu(node.bridge(node.host_bridge(0)), 0x0302, uuid);
  try {
    load_topology_xml(node.write("twice"));
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("(" + uuid + ") twice"), std::string::npos) << e.what();
  }
}

TEST(Topology, ReadsHwlocOneXml) {
  // hwloc 2 exports the DGX node in the 1.x format; the classes must survive the round trip.
  SyntheticNode node = testing::dgx_h100();
  const std::string v2 = node.write("dgx");
  hwloc_topology_t topo = nullptr;
  ASSERT_EQ(hwloc_topology_init(&topo), 0);
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL);
  ASSERT_EQ(hwloc_topology_set_xml(topo, v2.c_str()), 0);
  ASSERT_EQ(hwloc_topology_load(topo), 0);
  const std::string v1 =
      ::testing::TempDir() + "/railyard-dgx-v1-" + std::to_string(::getpid()) + ".xml";
  ASSERT_EQ(hwloc_topology_export_xml(topo, v1.c_str(), HWLOC_TOPOLOGY_EXPORT_XML_FLAG_V1), 0);
  hwloc_topology_destroy(topo);

  const Topology a = load_topology_xml(v2);
  const Topology b = load_topology_xml(v1);
  ASSERT_EQ(b.gpus.size(), 8u);
  ASSERT_EQ(b.nics.size(), 8u);
  for (size_t g = 0; g < 8; ++g) {
    EXPECT_EQ(b.gpus[g].pci_bus_id, a.gpus[g].pci_bus_id);
    EXPECT_EQ(b.gpus[g].cpuset, a.gpus[g].cpuset);
    EXPECT_EQ(b.gpu_nic[g], a.gpu_nic[g]) << "GPU " << g;
  }
}

TEST(Topology, MissingFileIsNamed) {
  try {
    load_topology_xml("/nonexistent/railyard-topo.xml");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/railyard-topo.xml"), std::string::npos);
  }
}

TEST(Topology, MalformedFileIsNamed) {
  const std::string path =
      ::testing::TempDir() + "/railyard-garbage-" + std::to_string(::getpid()) + ".xml";
  std::ofstream(path) << "this is not xml";
  try {
    load_topology_xml(path);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("lstopo"), std::string::npos);
  }
}

TEST(Topology, DiscoversThisMachine) {
  const Topology t = discover_topology();
  EXPECT_EQ(t.source, "live");
  EXPECT_FALSE(t.cpuset.empty());
  EXPECT_FALSE(t.numa_nodes.empty());
  EXPECT_EQ(t.gpu_nic.size(), t.gpus.size());
}

TEST(Topology, DistanceNames) {
  EXPECT_EQ(to_string(Distance::kPIX), "PIX");
  EXPECT_EQ(to_string(Distance::kPXB), "PXB");
  EXPECT_EQ(to_string(Distance::kPHB), "PHB");
  EXPECT_EQ(to_string(Distance::kNODE), "NODE");
  EXPECT_EQ(to_string(Distance::kSYS), "SYS");
}

}  // namespace
}  // namespace railyard
