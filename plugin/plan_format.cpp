// The two ways a plan is shown: JSON for railyard-topo --json, one line per task for the
// plugin's verbose report.

#include <nlohmann/json.hpp>
#include <string>

#include "railyard/planner.hpp"
#include "railyard/strings.hpp"

namespace railyard {
namespace {

std::string join_or(const std::vector<std::string>& parts, const char* none) {
  return parts.empty() ? std::string(none) : join(parts, ",");
}

}  // namespace

std::string plan_to_json(const StepPlan& plan) {
  nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
  for (const TaskPlan& task : plan.tasks) {
    nlohmann::ordered_json t;
    t["local_rank"] = task.local_rank;
    t["gpus"] = task.gpu_ids;
    t["gpu_pci"] = task.gpu_pci;
    t["cuda_visible_devices"] = task.cuda_visible_devices;
    t["nics"] = task.nics;
    t["nic_ports"] = task.nic_ports;
    t["netdev"] = task.netdev;
    t["cpus"] = task.cpus;
    t["env"] = nlohmann::ordered_json::object();
    for (const auto& [name, value] : task.env) t["env"][name] = value;
    tasks.push_back(std::move(t));
  }
  nlohmann::ordered_json out;
  out["node"] = plan.node_name;
  out["enabled"] = plan.policy.enabled;
  out["policy"] = describe(plan.policy);
  out["gpu_index"] = to_string(plan.gpu_index);
  out["warnings"] = plan.warnings;
  out["tasks"] = std::move(tasks);
  return out.dump(2);
}

// The task's GPUs by PCI bus id; a GPU the topology lacks by Slurm's id, marked as such, so
// the line never says "none" for a task that has CUDA_VISIBLE_DEVICES.
std::string gpu_field(const TaskPlan& task) {
  std::vector<std::string> parts;
  size_t known = 0;
  for (size_t g = 0; g < task.gpu_ids.size(); ++g) {
    const bool located =
        g < task.gpu_indices.size() && task.gpu_indices[g] >= 0 && known < task.gpu_pci.size();
    parts.push_back(located ? task.gpu_pci[known++] : task.gpu_ids[g] + "(not-in-topology)");
  }
  return join_or(parts.empty() ? task.gpu_pci : parts, "none");
}

std::string format_task_report(const StepPlan& plan, const TaskPlan& task) {
  return "railyard: host=" + (plan.node_name.empty() ? std::string("?") : plan.node_name) +
         " rank=" + std::to_string(task.local_rank) + " gpu=" + gpu_field(task) +
         " nic=" + join_or(task.nics, "none") + " cpus=" + (task.cpus.empty() ? "?" : task.cpus) +
         (plan.gpu_index == GpuIndex::kMinor ? " gpu_index=minor" : "") +
         (plan.driver.empty() ? "" : " driver=" + plan.driver);
}

}  // namespace railyard
