// The binding planner on synthetic nodes: GPU choice, CUDA_VISIBLE_DEVICES, NIC choice and
// round-robin, cpus inside the allocation, the environment, bad requests, and Slurm indices
// read by device minor.

#include "railyard/planner.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>

#include "railyard/cpuset.hpp"
#include "railyard/nvidia_gpu_info.hpp"
#include "synthetic_topology.hpp"

namespace railyard {
namespace {

using testing::kDgxNicOfGpu;
using testing::SyntheticNode;

const Topology& dgx() {
  static const Topology t = [] {
    SyntheticNode node = testing::dgx_h100();
    return load_topology_xml(node.write("dgx"));
  }();
  return t;
}

std::vector<std::string> indices(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(std::to_string(i));
  return out;
}

PlanRequest request(int tasks, int gpus) {
  PlanRequest r;
  r.local_tasks = tasks;
  r.step_gpus = indices(gpus);
  r.node_name = "dgx01";
  return r;
}

std::string nic_of_gpu(int gpu) {
  return "mlx5_" + std::to_string(kDgxNicOfGpu[gpu]);
}

TEST(Planner, DgxEightTasksGetTheirGpuPixNicAndLocalCpus) {
  PlanRequest r = request(8, 8);
  for (int t = 0; t < 8; ++t)
    r.task_cpus.push_back(std::to_string(4 * t) + "-" + std::to_string(4 * t + 3));
  const StepPlan plan = plan_step(dgx(), r);
  ASSERT_EQ(plan.tasks.size(), 8u);
  for (int t = 0; t < 8; ++t) {
    const TaskPlan& task = plan.tasks[t];
    EXPECT_EQ(task.local_rank, t);
    EXPECT_EQ(task.gpu_indices, std::vector<int>{t});
    EXPECT_EQ(task.gpu_pci, std::vector<std::string>{dgx().gpus[t].pci_bus_id});
    EXPECT_EQ(task.nics, std::vector<std::string>{nic_of_gpu(t)});
    EXPECT_EQ(task.cpus, r.task_cpus[t]);
    EXPECT_EQ(task.env.at("NCCL_IB_HCA"), "=" + nic_of_gpu(t) + ":1");
    EXPECT_EQ(task.env.at("UCX_NET_DEVICES"), nic_of_gpu(t) + ":1");
    EXPECT_EQ(task.env.at("NCCL_SOCKET_IFNAME"), "=ibp" + std::to_string(kDgxNicOfGpu[t]));
    EXPECT_EQ(task.env.at("OMPI_MCA_btl_tcp_if_include"), "ibp" + std::to_string(kDgxNicOfGpu[t]));
    EXPECT_EQ(task.env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    EXPECT_EQ(task.env.at("RAILYARD_LOCAL_RANK"), std::to_string(t));
    EXPECT_EQ(task.env.at("RAILYARD_GPU_PCI"), dgx().gpus[t].pci_bus_id);
    EXPECT_EQ(task.env.at("RAILYARD_NIC"), nic_of_gpu(t));
    EXPECT_EQ(task.env.at("RAILYARD_CPUS"), r.task_cpus[t]);
    EXPECT_EQ(task.env.at("RAILYARD_POLICY"), "gpu=closest,visible=rotate,cpu=on,net=on");
    EXPECT_EQ(task.env.count("NCCL_NET_GDR_LEVEL"), 0u);
  }
}

TEST(Planner, RotateIsolateAndAllVisibleDevices) {
  PlanRequest r = request(8, 8);
  EXPECT_EQ(plan_step(dgx(), r).tasks[3].cuda_visible_devices, "3,0,1,2,4,5,6,7");
  r.policy.visible_devices = VisibleDevices::kIsolate;
  EXPECT_EQ(plan_step(dgx(), r).tasks[3].env.at("CUDA_VISIBLE_DEVICES"), "3");
  r.policy.visible_devices = VisibleDevices::kAll;
  EXPECT_EQ(plan_step(dgx(), r).tasks[3].env.at("CUDA_VISIBLE_DEVICES"), "0,1,2,3,4,5,6,7");
}

TEST(Planner, ClosestFollowsTheTasksCpusAcrossSockets) {
  // Cyclic distribution: even ranks on socket 0, odd ranks on socket 1.
  PlanRequest r = request(8, 8);
  for (int t = 0; t < 8; ++t) r.task_cpus.push_back(std::to_string((t % 2) * 16 + t / 2));
  const StepPlan plan = plan_step(dgx(), r);
  std::set<int> used;
  for (int t = 0; t < 8; ++t) {
    const int gpu = plan.tasks[t].gpu_indices.at(0);
    used.insert(gpu);
    EXPECT_EQ(dgx().gpus[gpu].numa_node, t % 2) << "rank " << t;
    EXPECT_EQ(plan.tasks[t].cpus, r.task_cpus[t]);
  }
  EXPECT_EQ(used.size(), 8u);
  // Equally near choices keep rank order: ranks 0,2,4,6 get GPUs 0,1,2,3.
  EXPECT_EQ(plan.tasks[2].gpu_indices.at(0), 1);
  EXPECT_EQ(plan.tasks[3].gpu_indices.at(0), 5);
}

TEST(Planner, RankChoiceIgnoresCpusAndCpusFallBackToTheAllocation) {
  PlanRequest r = request(8, 8);
  r.policy.gpu_choice = GpuChoice::kRank;
  for (int t = 0; t < 8; ++t) r.task_cpus.push_back(std::to_string((t % 2) * 16 + t / 2));
  const StepPlan plan = plan_step(dgx(), r);
  EXPECT_EQ(plan.tasks[1].gpu_indices, std::vector<int>{1});
  // GPU 1 is on socket 0, the task's only cpu (16) on socket 1: the allocation wins.
  EXPECT_EQ(plan.tasks[1].cpus, "16");
}

TEST(Planner, AllowedCpusRestrictTheGpusNumaNode) {
  PlanRequest r = request(1, 8);
  r.policy.visible_devices = VisibleDevices::kIsolate;
  r.step_gpus = {"0"};
  r.task_cpus = {"8-11,16-19"};
  const StepPlan plan = plan_step(dgx(), r);
  EXPECT_EQ(plan.tasks[0].cpus, "8-11");
  r.policy.cpu_bind = false;
  EXPECT_EQ(plan_step(dgx(), r).tasks[0].cpus, "8-11,16-19");
}

TEST(Planner, CpusNeverLeaveTheAllocation) {
  const std::vector<std::string> lists = {"0", "15-16", "3,7,20-31", "31", "0-31", "5-9,17"};
  for (int tasks : {1, 3, 8, 12}) {
    PlanRequest r = request(tasks, 8);
    for (int t = 0; t < tasks; ++t) r.task_cpus.push_back(lists[t % lists.size()]);
    const StepPlan plan = plan_step(dgx(), r);
    for (int t = 0; t < tasks; ++t) {
      EXPECT_TRUE(CpuSet::parse(r.task_cpus[t]).contains(CpuSet::parse(plan.tasks[t].cpus)))
          << tasks << " tasks, rank " << t << ": " << plan.tasks[t].cpus;
      EXPECT_FALSE(plan.tasks[t].cpus.empty());
    }
  }
}

TEST(Planner, MoreTasksThanGpusShareRoundRobin) {
  const StepPlan plan = plan_step(dgx(), request(16, 8));
  std::vector<int> per_gpu(8, 0);
  for (int t = 0; t < 16; ++t) {
    ASSERT_EQ(plan.tasks[t].gpu_indices.size(), 1u);
    EXPECT_EQ(plan.tasks[t].gpu_indices[0], t % 8);
    ++per_gpu[plan.tasks[t].gpu_indices[0]];
    EXPECT_EQ(plan.tasks[t].nics, std::vector<std::string>{nic_of_gpu(t % 8)});
  }
  for (int n : per_gpu) EXPECT_EQ(n, 2);
  // Three tasks on two GPUs: loads 2 and 1.
  const StepPlan three = plan_step(dgx(), request(3, 2));
  EXPECT_EQ(three.tasks[2].gpu_indices, std::vector<int>{0});
  EXPECT_EQ(three.tasks[2].cuda_visible_devices, "0,1");
}

TEST(Planner, MoreTasksThanGpusStayOnTheirSocket) {
  // Slurm's block distribution: ranks 0-7 on socket 0, 8-15 on socket 1, two cpus each.
  PlanRequest r = request(16, 8);
  for (int t = 0; t < 16; ++t)
    r.task_cpus.push_back(std::to_string(2 * t) + "-" + std::to_string(2 * t + 1));
  const StepPlan plan = plan_step(dgx(), r);
  std::vector<int> per_gpu(8, 0);
  for (int t = 0; t < 16; ++t) {
    const int gpu = plan.tasks[t].gpu_indices.at(0);
    EXPECT_EQ(dgx().gpus[gpu].numa_node, t < 8 ? 0 : 1) << "rank " << t;
    EXPECT_EQ(plan.tasks[t].cpus, r.task_cpus[t]);
    ++per_gpu[gpu];
  }
  for (int n : per_gpu) EXPECT_EQ(n, 2);
  EXPECT_EQ(plan.tasks[0].gpu_indices, plan.tasks[1].gpu_indices);
  EXPECT_LT(plan.tasks[1].gpu_indices, plan.tasks[2].gpu_indices);
}

TEST(Planner, MoreGpusThanTasksSplitEvenly) {
  const StepPlan plan = plan_step(dgx(), request(2, 8));
  EXPECT_EQ(plan.tasks[0].gpu_indices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(plan.tasks[1].gpu_indices, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(plan.tasks[0].cuda_visible_devices, "0,1,2,3,4,5,6,7");
  EXPECT_EQ(plan.tasks[1].cuda_visible_devices, "4,5,6,7,0,1,2,3");
  EXPECT_EQ(plan.tasks[1].nics,
            (std::vector<std::string>{nic_of_gpu(4), nic_of_gpu(5), nic_of_gpu(6), nic_of_gpu(7)}));
  EXPECT_EQ(plan.tasks[0].env.at("NCCL_IB_HCA"), "=" + nic_of_gpu(0) + ":1," + nic_of_gpu(1) +
                                                     ":1," + nic_of_gpu(2) + ":1," + nic_of_gpu(3) +
                                                     ":1");
  EXPECT_EQ(plan.tasks[0].cpus, "0-15");
  EXPECT_EQ(plan.tasks[1].cpus, "16-31");

  const StepPlan three = plan_step(dgx(), request(3, 8));
  EXPECT_EQ(three.tasks[0].gpu_indices.size(), 3u);
  EXPECT_EQ(three.tasks[1].gpu_indices.size(), 3u);
  EXPECT_EQ(three.tasks[2].gpu_indices.size(), 2u);

  // With the tasks' cpus on the other sockets, closest swaps the shares.
  PlanRequest swapped = request(2, 8);
  swapped.task_cpus = {"16-31", "0-15"};
  const StepPlan s = plan_step(dgx(), swapped);
  EXPECT_EQ(s.tasks[0].gpu_indices, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(s.tasks[1].gpu_indices, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Planner, GpuLessNodeBindsNicsByCpusWithoutError) {
  SyntheticNode node;
  node.add_socket(4);
  node.add_socket(4);
  node.nic(node.bridge(node.host_bridge(0)), "mlx5_0", "ib0");
  node.nic(node.bridge(node.host_bridge(1)), "mlx5_1", "ib1");
  const Topology t = load_topology_xml(node.write("cpu"));
  PlanRequest r;
  r.local_tasks = 2;
  r.task_cpus = {"5", "1"};
  const StepPlan plan = plan_step(t, r);
  EXPECT_TRUE(plan.tasks[0].gpu_ids.empty());
  EXPECT_EQ(plan.tasks[0].nics, std::vector<std::string>{"mlx5_1"});
  EXPECT_EQ(plan.tasks[1].nics, std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(plan.tasks[0].cpus, "5");
  EXPECT_EQ(plan.tasks[0].env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(plan.tasks[0].env.count("RAILYARD_GPU_PCI"), 0u);
  EXPECT_EQ(plan.tasks[0].env.at("NCCL_IB_HCA"), "=mlx5_1:1");
}

TEST(Planner, OneNicServesEveryGpu) {
  SyntheticNode node;
  node.add_socket(8);
  node.add_socket(8);
  const int hb0 = node.host_bridge(0);
  node.gpu(node.bridge(hb0));
  node.gpu(node.bridge(hb0));
  node.nic(node.bridge(hb0), "mlx5_0", "ib0");
  const int hb1 = node.host_bridge(1);
  node.gpu(node.bridge(hb1));
  node.gpu(node.bridge(hb1));
  const Topology t = load_topology_xml(node.write("onenic"));
  const StepPlan plan = plan_step(t, request(4, 4));
  for (const TaskPlan& task : plan.tasks) {
    EXPECT_EQ(task.nics, std::vector<std::string>{"mlx5_0"});
  }
  EXPECT_EQ(plan.tasks[3].cpus, "8-15");
}

TEST(Planner, EquallyNearNicsAreSharedRoundRobin) {
  // Two GPUs and a dual-port card (two PCI functions) behind one switch.
  SyntheticNode node;
  node.add_socket(8);
  const int sw = node.pcie_switch(node.bridge(node.host_bridge(0)));
  node.gpu(node.port(sw));
  node.gpu(node.port(sw));
  const int card = node.port(sw);
  node.nic(card, "mlx5_0", "ib0");
  node.nic(card, "mlx5_1", "ib1");
  const Topology t = load_topology_xml(node.write("dual"));
  const StepPlan two = plan_step(t, request(2, 2));
  EXPECT_EQ(two.tasks[0].nics, std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(two.tasks[1].nics, std::vector<std::string>{"mlx5_1"});
  const StepPlan four = plan_step(t, request(4, 2));
  EXPECT_EQ(four.tasks[2].nics, std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(four.tasks[3].nics, std::vector<std::string>{"mlx5_1"});
}

TEST(Planner, MigUuidsPassThrough) {
  PlanRequest r = request(2, 0);
  r.step_gpus = {"MIG-4b1f7c2e-aaaa-5d3c-9d8e-0123456789ab",
                 "MIG-77e6e6a1-bbbb-5c3b-8f1e-ba9876543210"};
  const StepPlan unknown = plan_step(dgx(), r);
  EXPECT_EQ(unknown.tasks[1].cuda_visible_devices, r.step_gpus[1] + "," + r.step_gpus[0]);
  EXPECT_TRUE(unknown.tasks[1].gpu_pci.empty());
  EXPECT_EQ(unknown.tasks[1].gpu_indices, std::vector<int>{-1});

  Topology known = dgx();
  known.gpus[2].mig_uuids = {r.step_gpus[0]};
  known.gpus[6].mig_uuids = {r.step_gpus[1]};
  const StepPlan plan = plan_step(known, r);
  EXPECT_EQ(plan.tasks[0].gpu_pci, std::vector<std::string>{known.gpus[2].pci_bus_id});
  EXPECT_EQ(plan.tasks[0].nics, std::vector<std::string>{nic_of_gpu(2)});
  EXPECT_EQ(plan.tasks[1].nics, std::vector<std::string>{nic_of_gpu(6)});
  EXPECT_EQ(plan.tasks[1].cpus, "16-31");
}

TEST(Planner, SlurmRenumberedNamesGoIntoCudaVisibleDevices) {
  PlanRequest r = request(2, 0);
  r.step_gpus = {"4", "5"};
  r.cuda_names = {"0", "1"};
  const StepPlan plan = plan_step(dgx(), r);
  EXPECT_EQ(plan.tasks[1].cuda_visible_devices, "1,0");
  EXPECT_EQ(plan.tasks[1].gpu_pci, std::vector<std::string>{dgx().gpus[5].pci_bus_id});
}

TEST(Planner, GpusMissingFromTheTopologyArePlannedByRankWithAWarning) {
  SyntheticNode node;
  node.add_socket(8);
  node.nic(node.bridge(node.host_bridge(0)), "mlx5_0", "ib0");
  const Topology t = load_topology_xml(node.write("nogpu"));
  const StepPlan plan = plan_step(t, request(2, 2));
  ASSERT_EQ(plan.warnings.size(), 2u);
  EXPECT_NE(plan.warnings[1].find("step GPU 1 is not in the topology XML"), std::string::npos)
      << plan.warnings[1];
  EXPECT_NE(plan.warnings[1].find("(0 NVIDIA GPUs)"), std::string::npos) << plan.warnings[1];
  EXPECT_NE(plan.warnings[1].find("refresh the XML on this node"), std::string::npos);
  Topology live = t;
  live.source = "live";
  const std::string w = plan_step(live, request(2, 2)).warnings[1];
  EXPECT_NE(w.find("not in the topology of this node (hwloc sees 0 NVIDIA GPUs)"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("compare gres.conf with nvidia-smi -L"), std::string::npos) << w;
  EXPECT_EQ(w.find("lstopo"), std::string::npos) << w;
  const std::string line = format_task_report(plan, plan.tasks[1]);
  EXPECT_NE(line.find(" gpu=1(not-in-topology) "), std::string::npos) << line;
  EXPECT_EQ(plan.tasks[1].gpu_indices, std::vector<int>{-1});
  EXPECT_EQ(plan.tasks[1].cuda_visible_devices, "1,0");
  EXPECT_TRUE(plan.tasks[1].gpu_pci.empty());
  EXPECT_EQ(plan.tasks[1].nics, std::vector<std::string>{"mlx5_0"});
  EXPECT_EQ(plan.tasks[1].cpus, "0-7");
  EXPECT_TRUE(plan_step(dgx(), request(8, 8)).warnings.empty());
}

TEST(Planner, NicPatternsFilterTheCandidates) {
  PlanRequest r = request(1, 8);
  r.step_gpus = {"0"};
  r.policy.nic_exclude = {nic_of_gpu(0)};
  EXPECT_EQ(plan_step(dgx(), r).tasks[0].nics, std::vector<std::string>{nic_of_gpu(1)});  // PXB
  r.policy.nic_exclude.clear();
  r.policy.nic_include = {"mlx5_[0-3]"};
  const std::string nic = plan_step(dgx(), r).tasks[0].nics.at(0);
  EXPECT_TRUE(nic == nic_of_gpu(2) || nic == nic_of_gpu(3)) << nic;  // NODE, not SYS
  r.policy.nic_include = {"bnxt_*"};
  const StepPlan none = plan_step(dgx(), r);
  EXPECT_TRUE(none.tasks[0].nics.empty());
  EXPECT_EQ(none.tasks[0].env.count("NCCL_IB_HCA"), 0u);
}

TEST(Planner, NetworkPolicyOptions) {
  PlanRequest r = request(1, 1);
  r.policy.socket_ifname = "^docker,lo";
  r.policy.gdr_level = "PXB";
  StepPlan plan = plan_step(dgx(), r);
  EXPECT_EQ(plan.tasks[0].env.at("NCCL_SOCKET_IFNAME"), "^docker,lo");
  EXPECT_EQ(plan.tasks[0].env.count("OMPI_MCA_btl_tcp_if_include"), 0u);
  EXPECT_EQ(plan.tasks[0].env.at("NCCL_NET_GDR_LEVEL"), "PXB");
  r.policy.socket_ifname = "eno1";
  EXPECT_EQ(plan_step(dgx(), r).tasks[0].env.at("OMPI_MCA_btl_tcp_if_include"), "eno1");
  r.policy.net_env = false;
  plan = plan_step(dgx(), r);
  for (const char* name : {"NCCL_IB_HCA", "UCX_NET_DEVICES", "NCCL_SOCKET_IFNAME",
                           "NCCL_NET_GDR_LEVEL", "OMPI_MCA_btl_tcp_if_include"}) {
    EXPECT_EQ(plan.tasks[0].env.count(name), 0u) << name;
  }
  EXPECT_EQ(plan.tasks[0].nics, std::vector<std::string>{nic_of_gpu(0)});
}

TEST(Planner, DisabledPolicySetsNothing) {
  PlanRequest r = request(2, 2);
  r.policy.enabled = false;
  r.task_cpus = {"0-3"};
  const StepPlan plan = plan_step(dgx(), r);
  ASSERT_EQ(plan.tasks.size(), 2u);
  EXPECT_TRUE(plan.tasks[0].env.empty());
  EXPECT_EQ(plan.tasks[0].cpus, "0-3");
  EXPECT_EQ(plan.tasks[1].cpus, "0-31");
}

TEST(Planner, BadRequestsAreNamed) {
  auto message = [](PlanRequest r) {
    try {
      plan_step(dgx(), r);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  PlanRequest r = request(1, 1);
  r.step_gpus = {"gpu0"};
  EXPECT_NE(message(r).find("'gpu0'"), std::string::npos);
  r.step_gpus = {"MIG-x;rm"};
  EXPECT_NE(message(r).find("MIG-x;rm"), std::string::npos);
  r = request(0, 1);
  EXPECT_NE(message(r).find("at least 1"), std::string::npos);
  r = request(1, 1);
  r.task_cpus = {"0-"};
  EXPECT_NE(message(r).find("'0-'"), std::string::npos);
  r.task_cpus = {"0", "1"};
  EXPECT_NE(message(r).find("2 tasks"), std::string::npos);
  r = request(1, 2);
  r.cuda_names = {"0"};
  EXPECT_NE(message(r).find("CUDA device names"), std::string::npos);
}

TEST(Planner, DuplicateGpusForeignCpusAndGpusWithoutLocalityAreNamed) {
  auto message = [](const Topology& t, PlanRequest r) {
    try {
      plan_step(t, r);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  PlanRequest r = request(4, 4);
  r.step_gpus = {"0", "0", "0", "0"};
  EXPECT_NE(message(dgx(), r).find("step GPU '0' is listed twice"), std::string::npos)
      << message(dgx(), r);
  r = request(2, 1);
  r.task_cpus = {"5-1", "0"};
  EXPECT_NE(message(dgx(), r).find("range 5-1 is reversed"), std::string::npos);
  r.task_cpus = {"0-4294967296", "0"};
  EXPECT_NE(message(dgx(), r).find("'0-4294967296'"), std::string::npos);
  r.task_cpus = {"0", "9000"};  // the node has far fewer cpus
  EXPECT_NE(message(dgx(), r).find("cpu list '9000' of task 1 names cpus outside this node's"),
            std::string::npos)
      << message(dgx(), r);
  Topology hollow = dgx();
  hollow.gpus[0].cpuset = "";
  EXPECT_NE(message(hollow, request(1, 1))
                .find("GPU 0 (" + hollow.gpus[0].pci_bus_id + ") has an empty cpuset"),
            std::string::npos)
      << message(hollow, request(1, 1));
}

TEST(Planner, JsonHasTheDocumentedShape) {
  PlanRequest r = request(2, 8);
  const StepPlan plan = plan_step(dgx(), r);
  const nlohmann::json j = nlohmann::json::parse(plan_to_json(plan));
  EXPECT_EQ(j.at("node"), "dgx01");
  ASSERT_EQ(j.at("tasks").size(), 2u);
  const auto& t1 = j.at("tasks").at(1);
  EXPECT_EQ(t1.at("local_rank"), 1);
  EXPECT_EQ(t1.at("gpu_pci").size(), 4u);
  EXPECT_EQ(t1.at("gpu_pci").at(0), dgx().gpus[4].pci_bus_id);
  EXPECT_EQ(t1.at("nics").at(0), nic_of_gpu(4));
  EXPECT_EQ(t1.at("cpus"), "16-31");
  EXPECT_EQ(t1.at("env").at("CUDA_VISIBLE_DEVICES"), "4,5,6,7,0,1,2,3");
}

TEST(Planner, ReportLineNamesHostRankGpuNicCpus) {
  PlanRequest r = request(8, 8);
  const StepPlan plan = plan_step(dgx(), r);
  EXPECT_EQ(format_task_report(plan, plan.tasks[5]),
            "railyard: host=dgx01 rank=5 gpu=" + dgx().gpus[5].pci_bus_id +
                " nic=" + nic_of_gpu(5) + " cpus=16-31");
  SyntheticNode node;
  node.add_socket(2);
  PlanRequest bare;
  bare.node_name = "n1";
  const StepPlan cpu_only = plan_step(load_topology_xml(node.write("bare")), bare);
  EXPECT_EQ(format_task_report(cpu_only, cpu_only.tasks[0]),
            "railyard: host=n1 rank=0 gpu=none nic=none cpus=0-1");
}

TEST(Planner, ReportLineNamesTheDriverThatPassedTheCudaCheck) {
  StepPlan plan = plan_step(dgx(), request(8, 8));
  plan.driver = "580.159.04(CUDA<=13.0)";
  EXPECT_EQ(format_task_report(plan, plan.tasks[0]),
            "railyard: host=dgx01 rank=0 gpu=" + dgx().gpus[0].pci_bus_id +
                " nic=" + nic_of_gpu(0) + " cpus=0-15 driver=580.159.04(CUDA<=13.0)");
}

// The dgx node with the NVIDIA driver's /proc files of a node whose device minors run against
// PCI bus order (/dev/nvidia0 is the last GPU by bus id), as on some 4x H100 NVL nodes.
class ReversedMinors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("railyard-minors-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    topology_ = dgx();
    for (size_t i = 0; i < topology_.gpus.size(); ++i) {
      std::filesystem::create_directories(dir_ / topology_.gpus[i].pci_bus_id);
      std::ofstream(dir_ / topology_.gpus[i].pci_bus_id / "information")
          << "Model: \t\t NVIDIA H100 NVL\nGPU UUID: \t " << uuid(i) << "\nDevice Minor: \t "
          << 7 - i << "\n";
    }
    add_nvidia_driver_info(topology_, dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static std::string uuid(size_t gpu) {
    return "GPU-0000000" + std::to_string(gpu) + "-1111-2222-3333-444444444444";
  }
  std::filesystem::path dir_;
  Topology topology_;
};

// Slurm's GPU 0 is /dev/nvidia0 = PCI GPU 7: its NUMA node's cpus, its NIC, and its UUID in
// CUDA_VISIBLE_DEVICES (CUDA's PCI_BUS_ID number 0 would be PCI GPU 0).
TEST_F(ReversedMinors, MinorRuleBindsSlurmIndexToTheGpuOfThatMinor) {
  PlanRequest r = request(8, 8);
  r.policy.gpu_index = GpuIndex::kMinor;
  r.policy.gpu_choice = GpuChoice::kRank;
  r.policy.visible_devices = VisibleDevices::kIsolate;
  const StepPlan plan = plan_step(topology_, r);
  EXPECT_EQ(plan.gpu_index, GpuIndex::kMinor);
  EXPECT_TRUE(plan.warnings.empty());
  for (int t = 0; t < 8; ++t) {
    const TaskPlan& task = plan.tasks[t];
    const int gpu = 7 - t;
    EXPECT_EQ(task.gpu_ids, std::vector<std::string>{std::to_string(t)});
    EXPECT_EQ(task.gpu_indices, std::vector<int>{gpu});
    EXPECT_EQ(task.gpu_pci, std::vector<std::string>{topology_.gpus[gpu].pci_bus_id});
    EXPECT_EQ(task.nics, std::vector<std::string>{nic_of_gpu(gpu)});
    EXPECT_EQ(task.cpus, gpu < 4 ? "0-15" : "16-31");
    EXPECT_EQ(task.env.at("CUDA_VISIBLE_DEVICES"), uuid(gpu));
    EXPECT_EQ(task.env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    EXPECT_EQ(task.env.at("RAILYARD_GPU_PCI"), topology_.gpus[gpu].pci_bus_id);
  }
  EXPECT_EQ(format_task_report(plan, plan.tasks[0]),
            "railyard: host=dgx01 rank=0 gpu=" + topology_.gpus[7].pci_bus_id +
                " nic=" + nic_of_gpu(7) + " cpus=16-31 gpu_index=minor");
  EXPECT_EQ(nlohmann::json::parse(plan_to_json(plan)).at("gpu_index"), "minor");
}

// Renumbered (constrained) names and rotation: UUIDs, in Slurm's order after the task's own.
TEST_F(ReversedMinors, RenumberedAndRotatedNamesBecomeUuids) {
  PlanRequest r = request(2, 0);
  r.step_gpus = {"1", "6"};
  r.cuda_names = {"0", "1"};
  r.policy.gpu_index = GpuIndex::kMinor;
  r.policy.gpu_choice = GpuChoice::kRank;
  const StepPlan plan = plan_step(topology_, r);
  EXPECT_EQ(plan.tasks[0].gpu_indices, std::vector<int>{6});
  EXPECT_EQ(plan.tasks[1].gpu_indices, std::vector<int>{1});
  EXPECT_EQ(plan.tasks[1].cuda_visible_devices, uuid(1) + "," + uuid(6));
}

// Not stated: PCI bus order as before, with one warning that shows the two orders.
TEST_F(ReversedMinors, UnstatedRuleKeepsPciOrderAndWarns) {
  const StepPlan plan = plan_step(topology_, request(8, 8));
  EXPECT_EQ(plan.gpu_index, GpuIndex::kPci);
  EXPECT_EQ(plan.tasks[0].gpu_indices, std::vector<int>{0});
  EXPECT_EQ(plan.tasks[3].cuda_visible_devices, "3,0,1,2,4,5,6,7");
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("/dev/nvidia0=" + topology_.gpus[7].pci_bus_id),
            std::string::npos)
      << plan.warnings[0];
  EXPECT_EQ(nlohmann::json::parse(plan_to_json(plan)).at("gpu_index"), "pci");
}

// A GPU without a UUID keeps Slurm's integer, with a warning that it may name another GPU.
TEST_F(ReversedMinors, MissingUuidKeepsSlurmsNameWithAWarning) {
  topology_.gpus[7].uuid.clear();
  PlanRequest r = request(1, 1);
  r.policy.gpu_index = GpuIndex::kMinor;
  const StepPlan plan = plan_step(topology_, r);
  EXPECT_EQ(plan.tasks[0].gpu_indices, std::vector<int>{7});
  EXPECT_EQ(plan.tasks[0].cuda_visible_devices, "0");
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings[0].find("has no known UUID"), std::string::npos) << plan.warnings[0];
}

// A damaged or repeated minor: PCI bus order, Slurm's names, a warning; never a crash.
TEST_F(ReversedMinors, UnusableMinorsFallBackToPciOrder) {
  std::ofstream(dir_ / topology_.gpus[2].pci_bus_id / "information")
      << "Device Minor: \t 5\nDevice Minor: \t 2\n";
  Topology damaged = dgx();
  add_nvidia_driver_info(damaged, dir_);
  Topology repeated = topology_;
  repeated.gpus[2].minor = repeated.gpus[3].minor;
  for (const Topology* t : std::vector<const Topology*>{&damaged, &repeated, &dgx()}) {
    PlanRequest r = request(8, 8);
    r.policy.gpu_index = GpuIndex::kMinor;
    r.policy.visible_devices = VisibleDevices::kIsolate;
    const StepPlan plan = plan_step(*t, r);
    EXPECT_EQ(plan.gpu_index, GpuIndex::kPci);
    EXPECT_EQ(plan.tasks[0].gpu_indices, std::vector<int>{0});
    EXPECT_EQ(plan.tasks[0].cuda_visible_devices, "0");
    ASSERT_EQ(plan.warnings.size(), 1u);
    EXPECT_NE(plan.warnings[0].find("gpu_index=minor, but GPU"), std::string::npos)
        << plan.warnings[0];
  }
}

}  // namespace
}  // namespace railyard
