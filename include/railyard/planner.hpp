#pragma once
// The binding planner: a pure function from a node's topology, the GPUs Slurm gave a step and
// the tasks' allowed cpus to a per-task plan (GPUs, NICs, cpus, environment). Knows nothing of
// Slurm: the SPANK glue and railyard-topo both call it.

#include <map>
#include <string>
#include <vector>

#include "railyard/policy.hpp"
#include "railyard/topology.hpp"

namespace railyard {

struct PlanRequest {
  // The step's GPUs as Slurm gave them: Slurm's GPU indices ("0", "3"; what SLURM_STEP_GPUS
  // holds, mapped to GPUs by policy.gpu_index, gpu_numbering.hpp) or UUIDs ("MIG-...", "GPU-").
  std::vector<std::string> step_gpus;
  // How each step GPU is named in CUDA_VISIBLE_DEVICES, parallel to step_gpus (Slurm renumbers
  // when it constrains devices); empty: the step_gpus strings themselves. Where Slurm's indices
  // are device minors out of PCI bus order, the plan names the GPUs by UUID instead.
  std::vector<std::string> cuda_names;
  int local_tasks = 1;
  // Per local task, the cpus Slurm allowed it (hwloc list string); missing or empty: all of the
  // node's cpus.
  std::vector<std::string> task_cpus;
  std::string node_name;
  Policy policy;
};

struct TaskPlan {
  int local_rank = 0;
  std::vector<std::string> gpu_ids;        // the task's GPUs as Slurm named them (step order)
  std::vector<int> gpu_indices;            // into Topology::gpus; -1 where a UUID is not in it
  std::vector<std::string> gpu_pci;        // PCI bus ids; empty entries omitted
  std::string cuda_visible_devices;        // empty when the step has no GPUs
  std::vector<std::string> nics;           // RDMA device names, nearest the task's GPUs
  std::vector<std::string> nic_ports;      // "mlx5_1:1", the form NCCL_IB_HCA and UCX take
  std::string netdev;                      // interface for sockets; empty when none is known
  std::string cpus;                        // hwloc list string; never outside the allowed cpus
  std::map<std::string, std::string> env;  // variables to set, by name
};

struct StepPlan {
  std::string node_name;
  Policy policy;
  std::vector<TaskPlan> tasks;  // by local rank
  // What the plan had to do without (a step GPU the topology lacks, a stale XML); the plugin
  // shows these, the plan is still applied.
  std::vector<std::string> warnings;
  // How Slurm's GPU indices were read (the admin's gpu_index=, or kPci where the device minors
  // were unusable: a warning says so).
  GpuIndex gpu_index = GpuIndex::kPci;
  // The driver that passed the step's CUDA check ("580.159.04 (CUDA <= 13.0)"); empty when the
  // step asked for no CUDA version.
  std::string driver;
};

// Plans a step. Throws std::invalid_argument for a malformed request (a GPU id that is neither
// an index nor a UUID, a bad cpu list, no tasks). A GPU index the topology does not have (fake
// GPUs, hwloc without PCI data, a stale XML) is planned like a UUID of unknown locality: by
// rank, with a warning.
StepPlan plan_step(const Topology& topology, const PlanRequest& request);

// The railyard-topo --json shape: {"node":..., "policy":..., "gpu_index":"pci",
// "tasks":[{"local_rank":0, "gpu_pci":[...], "nics":[...], "cpus":"0-15", "env":{...}, ...}]}.
std::string plan_to_json(const StepPlan& plan);

// One line for the verbose report: "railyard: host=n1 rank=0 gpu=0000:03:00.0 nic=mlx5_1
// cpus=0-15", with " gpu_index=minor" where Slurm's indices were read as device minors and
// " driver=580.159.04(CUDA<=13.0)" after a passed CUDA check.
std::string format_task_report(const StepPlan& plan, const TaskPlan& task);

}  // namespace railyard
