// Topology discovery and planning on real nodes' hwloc dumps in ../shared/topologies (skipped
// when that folder is absent, as in a fresh clone).

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "railyard/planner.hpp"
#include "railyard/topology.hpp"

namespace railyard {
namespace {

std::string shared_topology(const std::string& name) {
  return std::string(RAILYARD_SOURCE_DIR) + "/../shared/topologies/" + name;
}

#define LOAD_OR_SKIP(var, name)                                                      \
  const std::string var##_path = shared_topology(name);                              \
  if (!std::filesystem::exists(var##_path)) GTEST_SKIP() << var##_path << " absent"; \
  const Topology var = load_topology_xml(var##_path)

PlanRequest request(int tasks, std::vector<std::string> gpus) {
  PlanRequest r;
  r.local_tasks = tasks;
  r.step_gpus = std::move(gpus);
  return r;
}

int nic_index(const Topology& t, const std::string& name) {
  for (size_t i = 0; i < t.nics.size(); ++i) {
    if (t.nics[i].name == name) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no NIC " << name;
  return 0;
}

TEST(TopologyConformance, CoralLassenPower9) {
  LOAD_OR_SKIP(t, "coral-lassen.xml");
  ASSERT_EQ(t.gpus.size(), 4u);
  EXPECT_EQ(t.gpus[0].pci_bus_id, "0004:04:00.0");
  EXPECT_EQ(t.gpus[3].pci_bus_id, "0035:04:00.0");
  EXPECT_EQ(t.gpus[0].name, "Tesla V100-SXM2-16GB");
  EXPECT_EQ(t.gpus[0].uuid.rfind("GPU-", 0), 0u);
  EXPECT_EQ(t.gpus[0].numa_node, 0);
  EXPECT_EQ(t.gpus[2].numa_node, 8);
  ASSERT_EQ(t.nics.size(), 4u);
  EXPECT_EQ(t.nics[0].netdevs, std::vector<std::string>{"hsi0"});
  // Each socket's two NIC ports are equally near both of its GPUs.
  EXPECT_EQ(t.gpu_nic[0][nic_index(t, "mlx5_0")], t.gpu_nic[0][nic_index(t, "mlx5_1")]);
  EXPECT_EQ(t.gpu_nic[0][nic_index(t, "mlx5_2")], Distance::kSYS);

  const StepPlan plan = plan_step(t, request(4, {"0", "1", "2", "3"}));
  const char* expected_nic[4] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(plan.tasks[r].gpu_pci, std::vector<std::string>{t.gpus[r].pci_bus_id});
    EXPECT_EQ(plan.tasks[r].nics, std::vector<std::string>{expected_nic[r]}) << "rank " << r;
    EXPECT_EQ(plan.tasks[r].cpus, r < 2 ? "8-87" : "96-175");
  }
  EXPECT_EQ(plan.tasks[2].env.at("NCCL_IB_HCA"), "=mlx5_2:1");

  // One task driving all four GPUs uses all four ports, one per GPU.
  const StepPlan one = plan_step(t, request(1, {"0", "1", "2", "3"}));
  EXPECT_EQ(one.tasks[0].nics, (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}));
  EXPECT_EQ(one.tasks[0].cpus, "8-87,96-175");
}

TEST(TopologyConformance, Cts1PascalAllGpusOnSocketZero) {
  LOAD_OR_SKIP(t, "cts1-pascal.xml");
  ASSERT_EQ(t.gpus.size(), 2u);  // the ASPEED VGA (1a03) is not one
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.gpu_nic[0][0], Distance::kPIX);
  EXPECT_EQ(t.gpu_nic[1][0], Distance::kPIX);
  EXPECT_EQ(t.numa_nodes.size(), 2u);

  PlanRequest r = request(2, {"0", "1"});
  const StepPlan plan = plan_step(t, r);
  for (const TaskPlan& task : plan.tasks) {
    EXPECT_EQ(task.nics, std::vector<std::string>{"mlx5_0"});
    EXPECT_EQ(task.cpus, "0-17,36-53");
  }
  // A task Slurm put on socket 1 keeps its cpus: none of them are near the GPUs.
  r.task_cpus = {"0-17", "18-35"};
  const StepPlan split = plan_step(t, r);
  EXPECT_EQ(split.tasks[0].cpus, "0-17");
  EXPECT_EQ(split.tasks[1].cpus, "18-35");
}

TEST(TopologyConformance, JusufBmcVgaIsNotAGpu) {
  LOAD_OR_SKIP(t, "jusuf-gpu.xml");
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].vendor_id, 0x10deu);
  EXPECT_EQ(t.gpus[0].pci_bus_id, "0000:01:00.0");
  EXPECT_EQ(t.gpus[0].numa_node, 3);
  EXPECT_EQ(t.numa_nodes.size(), 8u);
  ASSERT_EQ(t.nics.size(), 2u);
  EXPECT_EQ(t.gpu_nic[0][0], Distance::kSYS);

  // Two tasks share the one GPU; both NICs are equally far, so they split them.
  const StepPlan plan = plan_step(t, request(2, {"0"}));
  EXPECT_EQ(plan.tasks[0].nics, std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(plan.tasks[1].nics, std::vector<std::string>{"mlx5_1"});
  EXPECT_EQ(plan.tasks[0].cpus, "48-63,176-191");
  EXPECT_EQ(plan.tasks[1].cuda_visible_devices, "0");
}

}  // namespace
}  // namespace railyard
