// The binding planner. GPUs go to tasks by a minimum-cost assignment: nearness to the task's
// cpus first, then closeness to the plain by-rank order, so equal choices follow local rank.
// NICs follow the task's GPUs, cpus follow the GPUs' NUMA nodes inside the task's allocation.

#include "railyard/planner.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "railyard/assignment.hpp"
#include "railyard/contract_env.hpp"
#include "railyard/cpuset.hpp"
#include "railyard/gpu_numbering.hpp"
#include "railyard/strings.hpp"

namespace railyard {
namespace {

// Beyond this many rows or columns the assignment's cubic cost is too much for slurmstepd;
// GPUs then go by local rank.
constexpr size_t kMaxAssignment = 512;

struct StepGpu {
  std::string id;         // as Slurm gave it
  std::string cuda_name;  // as CUDA_VISIBLE_DEVICES names it
  int index = -1;         // into Topology::gpus, -1 when unknown
  CpuSet local;           // empty when unknown
};

// A device index as Slurm and CUDA write it: digits, short enough to convert safely.
bool device_index(std::string_view s) {
  return s.size() <= 6 && all_digits(s);
}

bool uuid_like(std::string_view s) {
  return (s.rfind("MIG-", 0) == 0 || s.rfind("GPU-", 0) == 0) && s.size() <= 96 &&
         std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '/'; });
}

// What happened and what to do differ: a stale cached XML is refreshed; a live topology without
// the GPU means Slurm hands out a device that this node does not show as an NVIDIA GPU.
std::string missing_gpu_warning(const Topology& topology, const std::string& id) {
  const std::string count =
      std::to_string(topology.gpus.size()) + " NVIDIA GPU" + (topology.gpus.size() == 1 ? "" : "s");
  const std::string what = "step GPU " + id + " is not in the topology";
  const std::string effect =
      "the task still gets it in CUDA_VISIBLE_DEVICES, but its cpus and NIC are planned without "
      "the GPU's locality";
  if (topology.source != "live") {
    return what + " XML " + topology.source + " (" + count + "): " + effect +
           "; refresh the XML on this node (lstopo --of xml) or fix plugstack.conf's topology=";
  }
  return what + " of this node (hwloc sees " + count + "): " + effect +
         ". Slurm's gres.conf names a GPU device the node does not show: a driver not loaded, a "
         "wrong File= line, or fake GPUs (as on a test cluster); compare gres.conf with "
         "nvidia-smi -L";
}

StepGpu resolve_gpu(const Topology& topology, const GpuNumbering& numbering, const std::string& id,
                    std::vector<std::string>& warnings) {
  StepGpu gpu;
  gpu.id = id;
  if (device_index(id)) {
    const size_t index = std::stoul(id);
    if (index < numbering.gpus.size()) {
      gpu.index = numbering.gpus[index];
    } else {
      warnings.push_back(missing_gpu_warning(topology, id));
    }
  } else if (uuid_like(id)) {
    for (size_t i = 0; i < topology.gpus.size() && gpu.index < 0; ++i) {
      const Gpu& g = topology.gpus[i];
      if (g.uuid == id ||
          std::find(g.mig_uuids.begin(), g.mig_uuids.end(), id) != g.mig_uuids.end()) {
        gpu.index = static_cast<int>(i);
      }
    }
  } else {
    throw std::invalid_argument("invalid step GPU '" + id +
                                "': expected a GPU index (0, 1, ...) or a UUID (GPU-..., MIG-...)");
  }
  if (gpu.index >= 0) {
    // No locality would make "the GPU's cpus" every cpu of the task: a damaged topology.
    const Gpu& g = topology.gpus[gpu.index];
    if (g.cpuset.empty()) {
      throw std::invalid_argument("GPU " + std::to_string(gpu.index) + " (" + g.pci_bus_id +
                                  ") has an empty cpuset in " + topology.source +
                                  ": the topology is damaged; regenerate it (lstopo --of xml)");
    }
    gpu.local = CpuSet::parse(g.cpuset);
  }
  return gpu;
}

// How CUDA_VISIBLE_DEVICES names a step GPU. Slurm's integer means, to CUDA under
// CUDA_DEVICE_ORDER=PCI_BUS_ID, the GPU of that PCI bus rank among those the task can open: all
// of the node's, or only the step's where Slurm constrains devices (and renumbers). Read by
// device minor out of PCI bus order, Slurm's integers name other GPUs, and which rank is right
// depends on that constraint, which the plugin cannot see: the GPU's UUID is right either way.
std::string cuda_name_of(const Topology& topology, const GpuNumbering& numbering,
                         const StepGpu& gpu, std::string slurm_name,
                         std::vector<std::string>& warnings) {
  if (numbering.rule != GpuIndex::kMinor || !numbering.minors_out_of_pci_order ||
      !device_index(slurm_name) || gpu.index < 0) {
    return slurm_name;
  }
  const Gpu& g = topology.gpus[gpu.index];
  if (g.uuid.starts_with("GPU-")) return g.uuid;
  warnings.push_back("GPU " + g.pci_bus_id + " (Slurm's GPU " + gpu.id +
                     ") has no known UUID: CUDA_VISIBLE_DEVICES keeps Slurm's name " + slurm_name +
                     " for it, which CUDA may read as another GPU here");
  return slurm_name;
}

// The step's GPUs in request order, located in the topology and named for CUDA; records the
// numbering rule and its warnings in `plan`.
std::vector<StepGpu> resolve_step_gpus(const Topology& topology, const PlanRequest& request,
                                       StepPlan& plan) {
  const GpuNumbering numbering = number_gpus(topology, request.policy.gpu_index);
  plan.gpu_index = numbering.rule;
  plan.warnings.insert(plan.warnings.end(), numbering.warnings.begin(), numbering.warnings.end());
  std::vector<StepGpu> gpus;
  for (size_t i = 0; i < request.step_gpus.size(); ++i) {
    StepGpu gpu = resolve_gpu(topology, numbering, request.step_gpus[i], plan.warnings);
    const std::string& slurm_name = request.cuda_names.empty() ? gpu.id : request.cuda_names[i];
    if (!device_index(slurm_name) && !uuid_like(slurm_name)) {
      throw std::invalid_argument("invalid CUDA device name '" + slurm_name +
                                  "': expected an index or a UUID");
    }
    gpu.cuda_name = cuda_name_of(topology, numbering, gpu, slurm_name, plan.warnings);
    for (const StepGpu& other : gpus) {
      if (other.id == gpu.id || (gpu.index >= 0 && other.index == gpu.index)) {
        throw std::invalid_argument("step GPU '" + gpu.id + "' is listed twice (as '" + other.id +
                                    "' before): each GPU may appear once");
      }
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

std::int64_t square(std::int64_t x) {
  return x * x;
}

// The side with more members (rows) is split into slots of the other (targets): with more tasks
// than GPUs each GPU serves a fixed number of tasks; with more GPUs each task owns a fixed share.
struct Slots {
  bool many_tasks = false;
  size_t n_gpus = 0;
  size_t rows = 0;
  size_t targets = 0;
  std::vector<int> slot_target;  // per slot, the target it belongs to

  // The by-rank answer: round-robin tasks over GPUs, or contiguous GPU shares per task.
  int rank_target(size_t row) const {
    return many_tasks ? static_cast<int>(row % n_gpus) : slot_target[row];
  }
};

Slots make_slots(size_t n_tasks, size_t n_gpus) {
  Slots slots;
  slots.many_tasks = n_tasks >= n_gpus;
  slots.n_gpus = n_gpus;
  slots.rows = slots.many_tasks ? n_tasks : n_gpus;
  slots.targets = slots.many_tasks ? n_gpus : n_tasks;
  for (size_t k = 0; k < slots.targets; ++k) {
    const size_t share = slots.rows / slots.targets + (k < slots.rows % slots.targets ? 1 : 0);
    slots.slot_target.insert(slots.slot_target.end(), share, static_cast<int>(k));
  }
  return slots;
}

// Per row, the target nearest by shared cpus (computed once per task and GPU: the cost matrix
// repeats them for every slot), ties kept in rank order by the squared distance from the
// by-rank target; its largest possible total stays below one cpu of overlap.
std::vector<int> closest_targets(const Slots& slots, const std::vector<StepGpu>& gpus,
                                 const std::vector<CpuSet>& allowed) {
  std::vector<std::vector<std::int64_t>> shared(allowed.size(),
                                                std::vector<std::int64_t>(gpus.size()));
  for (size_t t = 0; t < allowed.size(); ++t) {
    for (size_t g = 0; g < gpus.size(); ++g) shared[t][g] = (allowed[t] & gpus[g].local).count();
  }
  auto overlap = [&](size_t row, int target) {
    return slots.many_tasks ? shared[row][target] : shared[target][row];
  };
  const size_t rows = slots.rows;
  const std::int64_t n = static_cast<std::int64_t>(std::max(rows, slots.targets));
  const std::int64_t weight = static_cast<std::int64_t>(rows) * n * n + 1;
  std::vector<std::vector<std::int64_t>> cost(rows, std::vector<std::int64_t>(rows));
  for (size_t r = 0; r < rows; ++r) {
    for (size_t s = 0; s < rows; ++s) {
      const int t = slots.slot_target[s];
      cost[r][s] = -overlap(r, t) * weight + square(t - slots.rank_target(r));
    }
  }
  const std::vector<int> slot_of = min_cost_assignment(cost);
  std::vector<int> target_of(rows);
  for (size_t r = 0; r < rows; ++r) target_of[r] = slots.slot_target[slot_of[r]];
  return target_of;
}

// Per task, the step GPUs (indices into `gpus`, ascending) it drives.
std::vector<std::vector<int>> assign_gpus(const std::vector<StepGpu>& gpus,
                                          const std::vector<CpuSet>& allowed, GpuChoice choice) {
  std::vector<std::vector<int>> of_task(allowed.size());
  if (gpus.empty()) return of_task;
  const Slots slots = make_slots(allowed.size(), gpus.size());
  std::vector<int> target_of(slots.rows);
  // With one GPU, or one task, there is nothing to choose.
  if (choice == GpuChoice::kRank || slots.targets == 1 || slots.rows > kMaxAssignment) {
    for (size_t r = 0; r < slots.rows; ++r) target_of[r] = slots.rank_target(r);
  } else {
    target_of = closest_targets(slots, gpus, allowed);
  }
  for (size_t r = 0; r < slots.rows; ++r) {
    if (slots.many_tasks) {
      of_task[r].push_back(target_of[r]);
    } else {
      of_task[target_of[r]].push_back(static_cast<int>(r));
    }
  }
  for (auto& list : of_task) std::sort(list.begin(), list.end());
  return of_task;
}

// NICs equally near a GPU (or, without one, a task's cpus), by index into Topology::nics.
std::vector<int> nearest_nics(const Topology& topology, const std::vector<int>& usable,
                              int gpu_index, const CpuSet& cpus) {
  std::vector<int> best;
  if (gpu_index >= 0 && static_cast<size_t>(gpu_index) < topology.gpu_nic.size()) {
    const auto& row = topology.gpu_nic[gpu_index];
    Distance nearest = Distance::kSYS;
    for (int n : usable) nearest = std::min(nearest, row[n]);
    for (int n : usable) {
      if (row[n] == nearest) best.push_back(n);
    }
    return best;
  }
  int most = 0;
  for (int n : usable) {
    const std::string& local = topology.nics[n].cpuset;
    const int shared = local.empty() ? 0 : (CpuSet::parse(local) & cpus).count();
    if (shared > most) {
      most = shared;
      best.clear();
    }
    if (shared == most) best.push_back(n);
  }
  return best;
}

// The request's shape: task and GPU counts that the cpu lists and CUDA names must match.
void check_request(const PlanRequest& request) {
  if (request.local_tasks < 1) {
    throw std::invalid_argument("local task count must be at least 1, got " +
                                std::to_string(request.local_tasks));
  }
  const size_t n_tasks = static_cast<size_t>(request.local_tasks);
  if (request.task_cpus.size() > n_tasks) {
    throw std::invalid_argument("cpu lists for " + std::to_string(request.task_cpus.size()) +
                                " tasks given, but the step has " + std::to_string(n_tasks) +
                                " local tasks");
  }
  if (!request.cuda_names.empty() && request.cuda_names.size() != request.step_gpus.size()) {
    throw std::invalid_argument(
        "CUDA device names for " + std::to_string(request.cuda_names.size()) +
        " GPUs given, but the step has " + std::to_string(request.step_gpus.size()) + " GPUs");
  }
}

// Each task's allocation: its cpu list where Slurm gave one, else the node's cpus.
std::vector<CpuSet> allowed_cpus(const Topology& topology, const PlanRequest& request) {
  const CpuSet node_cpus = CpuSet::parse(topology.cpuset);
  std::vector<CpuSet> allowed;
  for (size_t t = 0; t < static_cast<size_t>(request.local_tasks); ++t) {
    const bool given = t < request.task_cpus.size() && !request.task_cpus[t].empty();
    allowed.push_back(given ? CpuSet::parse(request.task_cpus[t]) : node_cpus);
    if (given && !node_cpus.contains(allowed.back())) {
      throw std::invalid_argument("cpu list '" + request.task_cpus[t] + "' of task " +
                                  std::to_string(t) + " names cpus outside this node's " +
                                  topology.cpuset + " (" + topology.source + ")");
    }
  }
  return allowed;
}

// What every task's plan draws on: the step's GPUs, the NICs the policy allows, and how often
// each set of equally near NICs has been handed out (the next user gets the next one, so ranks
// sharing a set spread over it in local-rank order).
struct StepContext {
  const Topology& topology;
  const Policy& policy;
  const std::vector<StepGpu>& gpus;
  std::vector<int> usable_nics;
  std::map<std::vector<int>, size_t> turns;
};

// CUDA_VISIBLE_DEVICES of a task owning `own`: its GPUs first, then (rotate) the step's others,
// or only its own (isolate), or all in Slurm's order (all).
std::string visible_devices(const StepContext& c, const std::vector<int>& own) {
  std::vector<std::string> visible;
  if (c.policy.visible_devices != VisibleDevices::kAll) {
    for (int g : own) visible.push_back(c.gpus[g].cuda_name);
  }
  if (c.policy.visible_devices != VisibleDevices::kIsolate) {
    for (size_t g = 0; g < c.gpus.size(); ++g) {
      const bool mine = std::find(own.begin(), own.end(), static_cast<int>(g)) != own.end();
      if (!mine || c.policy.visible_devices == VisibleDevices::kAll) {
        visible.push_back(c.gpus[g].cuda_name);
      }
    }
  }
  return join(visible, ",");
}

// The NICs nearest the task's GPUs (or its cpus, without GPUs), their ports and netdev.
void choose_nics(StepContext& c, const std::vector<int>& own, const CpuSet& allowed,
                 TaskPlan& task) {
  std::vector<int> chosen;
  auto take = [&](int gpu_index) {
    const std::vector<int> candidates = nearest_nics(c.topology, c.usable_nics, gpu_index, allowed);
    if (candidates.empty()) return;
    const int nic = candidates[c.turns[candidates]++ % candidates.size()];
    if (std::find(chosen.begin(), chosen.end(), nic) == chosen.end()) chosen.push_back(nic);
  };
  if (own.empty()) take(-1);
  for (int g : own) take(c.gpus[g].index);
  for (int n : chosen) {
    const Nic& nic = c.topology.nics[n];
    task.nics.push_back(nic.name);
    if (nic.efa) continue;
    for (unsigned port : nic.ports) task.nic_ports.push_back(nic.name + ":" + std::to_string(port));
    if (task.netdev.empty() && !nic.netdevs.empty()) task.netdev = nic.netdevs.front();
  }
}

// NCCL's, UCX's and Open MPI's network variables for the task's NICs.
void set_network_env(const Policy& policy, TaskPlan& task) {
  auto& env = task.env;
  if (!task.nic_ports.empty()) {
    env["NCCL_IB_HCA"] = "=" + join(task.nic_ports, ",");
    env["UCX_NET_DEVICES"] = join(task.nic_ports, ",");
  }
  if (!policy.socket_ifname.empty()) {
    env["NCCL_SOCKET_IFNAME"] = policy.socket_ifname;
    if (policy.socket_ifname.find_first_of("^=") == std::string::npos) {
      env["OMPI_MCA_btl_tcp_if_include"] = policy.socket_ifname;
    }
  } else if (!task.netdev.empty()) {
    // NCCL matches interface names by prefix; "=" asks for exactly this one.
    env["NCCL_SOCKET_IFNAME"] = "=" + task.netdev;
    env["OMPI_MCA_btl_tcp_if_include"] = task.netdev;
  }
  if (!policy.gdr_level.empty()) env["NCCL_NET_GDR_LEVEL"] = policy.gdr_level;
}

// The task's environment: its devices, its network and railyard's contract variables.
void set_task_env(const StepContext& c, size_t t, TaskPlan& task) {
  auto& env = task.env;
  if (!c.gpus.empty()) {
    env["CUDA_VISIBLE_DEVICES"] = task.cuda_visible_devices;
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  }
  if (c.policy.net_env) set_network_env(c.policy, task);
  env[contract_env::kLocalRank] = std::to_string(t);
  if (!task.gpu_pci.empty()) env[contract_env::kGpuPci] = join(task.gpu_pci, ",");
  if (!task.nics.empty()) env[contract_env::kNic] = join(task.nics, ",");
  env[contract_env::kPolicy] = describe(c.policy);
  env[contract_env::kCpus] = task.cpus;
}

// Task t's plan: the GPUs `own`, the cpus near them inside `allowed`, NICs and environment.
TaskPlan plan_task(StepContext& c, size_t t, const std::vector<int>& own, const CpuSet& allowed) {
  TaskPlan task;
  task.local_rank = static_cast<int>(t);
  if (!c.policy.enabled) {
    task.cpus = allowed.to_string();
    return task;
  }
  CpuSet gpu_local;
  for (int g : own) {
    task.gpu_ids.push_back(c.gpus[g].id);
    task.gpu_indices.push_back(c.gpus[g].index);
    if (c.gpus[g].index >= 0) task.gpu_pci.push_back(c.topology.gpus[c.gpus[g].index].pci_bus_id);
    gpu_local = gpu_local | c.gpus[g].local;
  }
  task.cuda_visible_devices = visible_devices(c, own);
  const CpuSet near = gpu_local & allowed;
  task.cpus = (c.policy.cpu_bind && !near.empty() ? near : allowed).to_string();
  choose_nics(c, own, allowed, task);
  set_task_env(c, t, task);
  return task;
}

}  // namespace

StepPlan plan_step(const Topology& topology, const PlanRequest& request) {
  check_request(request);
  StepPlan plan;
  plan.node_name = request.node_name;
  plan.policy = request.policy;
  const std::vector<StepGpu> gpus = resolve_step_gpus(topology, request, plan);
  const std::vector<CpuSet> allowed = allowed_cpus(topology, request);
  StepContext c{topology, request.policy, gpus, {}, {}};
  for (size_t n = 0; n < topology.nics.size(); ++n) {
    if (nic_allowed(c.policy, topology.nics[n].name)) c.usable_nics.push_back(static_cast<int>(n));
  }
  const std::vector<std::vector<int>> gpus_of = assign_gpus(gpus, allowed, c.policy.gpu_choice);
  for (size_t t = 0; t < allowed.size(); ++t) {
    plan.tasks.push_back(plan_task(c, t, gpus_of[t], allowed[t]));
  }
  return plan;
}

}  // namespace railyard
