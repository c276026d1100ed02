// The SPANK glue: Slurm's entry points around the pure parts (options, planner, driver check).
//
// Contexts: in srun/sbatch/salloc (local, allocator) the options are validated, so a bad value
// fails at once; in slurmstepd (remote) the step's plan is computed once in user_init and
// applied per task in task_init, in the task just before execve. Every entry point catches all
// exceptions and reports through slurm_error; none ever exits. Nothing fails in the slurmd or
// prolog/epilog contexts, nor in the batch and extern steps, where a plugin error would drain
// the node instead of failing one step.

// spank.h declares the slurm_spank_* entry points outside its extern "C" block.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "railyard/contract_env.hpp"
#include "railyard/cpuset.hpp"
#include "railyard/driver_check.hpp"
#include "railyard/nvidia_gpu_info.hpp"
#include "railyard/planner.hpp"
#include "railyard/plugin_options.hpp"
#include "railyard/step_env.hpp"
#include "railyard/topology.hpp"

#define RAILYARD_EXPORT extern "C" __attribute__((visibility("default")))

RAILYARD_EXPORT const char plugin_name[] = "railyard";
RAILYARD_EXPORT const char plugin_type[] = "spank";
RAILYARD_EXPORT const unsigned int plugin_version = SLURM_VERSION_NUMBER;
RAILYARD_EXPORT const unsigned int spank_plugin_version = 1;

namespace {

using railyard::UserOption;

// Slurm treats only a negative return as failure (plugstack.c: rc < 0), so ESPANK_ERROR
// itself, a positive code, would be ignored.
constexpr int kFail = -ESPANK_ERROR;

// What the plugin knows within one process (srun, or one step's slurmstepd). Task processes
// are forked from slurmstepd after user_init, so they inherit the plan.
struct State {
  std::optional<railyard::AdminConfig> admin;
  std::string admin_error;  // why plugstack.conf's arguments were refused
  bool active = false;      // remote: this step gets a plan
  std::optional<railyard::StepPlan> plan;
  // Whether user_init found that the step cannot run (it has logged why). It fails the tasks
  // instead of itself: srun exits 0 when a step fails to launch, but reports failed tasks
  // with a non-zero code.
  bool step_failed = false;
};
State& state() {
  static State s;
  return s;
}

// Option callbacks (local and allocator contexts): reject a bad value before the job exists.
int option_callback(int val, const char* optarg, int remote);

struct RegisteredOption {
  UserOption id;
  std::string name, arginfo, usage;
  spank_option option{};
};
std::vector<RegisteredOption>& registered_options() {
  static std::vector<RegisteredOption> options = [] {
    std::vector<RegisteredOption> out;
    for (const auto& spec : railyard::user_option_specs()) {
      out.push_back({spec.id,
                     std::string(spec.name),
                     std::string(spec.arginfo),
                     std::string(spec.usage),
                     {}});
    }
    for (auto& o : out) {
      o.option =
          spank_option{o.name.data(),          o.arginfo.empty() ? nullptr : o.arginfo.data(),
                       o.usage.data(),         o.arginfo.empty() ? 0 : 1,
                       static_cast<int>(o.id), option_callback};
    }
    return out;
  }();
  return options;
}

int option_callback(int val, const char* optarg, int remote) {
  // In slurmstepd the values are read again (and judged) in user_init, where a failure fails
  // the step cleanly.
  if (remote) return 0;
  try {
    const auto id = static_cast<UserOption>(val);
    // A flag carries no value, but Slurm hands flags that sbatch/salloc passed on to srun
    // through the environment the text "(null)".
    const bool flag = railyard::user_option_spec(id).arginfo.empty();
    const std::optional<std::string> value =
        optarg && !flag ? std::optional<std::string>(optarg) : std::nullopt;
    railyard::validate_user_value(id, value);
    const auto& admin = state().admin;
    if (admin) {
      const railyard::UserSetting setting{id, value};
      railyard::resolve_policy(*admin, std::span(&setting, 1));
    }
    return 0;
  } catch (const std::exception& e) {
    slurm_error("railyard: %s", e.what());
  } catch (...) {
    slurm_error("railyard: unexpected error while checking an option");
  }
  return kFail;
}

std::optional<std::string> job_env(spank_t sp, const char* name) {
  std::vector<char> buffer(256);
  while (true) {
    const spank_err_t rc = spank_getenv(sp, name, buffer.data(), static_cast<int>(buffer.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buffer.data());
    if (rc != ESPANK_NOSPACE || buffer.size() >= (1u << 20)) return std::nullopt;
    buffer.resize(buffer.size() * 4);
  }
}

template <typename T>
T item(spank_t sp, spank_item_t what, const char* name) {
  T value{};
  if (spank_get_item(sp, what, &value) != ESPANK_SUCCESS) {
    throw std::runtime_error(std::string("Slurm did not give ") + name);
  }
  return value;
}

// Slurm's name for this node, from the step's environment where it has one, else the host
// name (the same on most clusters).
std::string node_name(spank_t sp) {
  if (auto name = job_env(sp, "SLURMD_NODENAME"); name && !name->empty()) return *name;
  // This node's place in Slurm's network topology: "node1", or "switch1.node1" with the tree
  // plugin; the node name is its last part.
  if (auto addr = job_env(sp, "SLURM_TOPOLOGY_ADDR"); addr && !addr->empty()) {
    return addr->substr(addr->rfind('.') + 1);
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) return host;
  return "unknown";
}

std::vector<railyard::UserSetting> user_settings(spank_t sp) {
  std::vector<railyard::UserSetting> out;
  for (auto& o : registered_options()) {
    char* optarg = nullptr;
    if (spank_option_getopt(sp, &o.option, &optarg) != ESPANK_SUCCESS) continue;
    out.push_back({o.id, o.arginfo.empty() || !optarg ? std::optional<std::string>()
                                                      : std::optional<std::string>(optarg)});
  }
  return out;
}

// Runs `body`, turning every exception into a logged error and a failing return code.
template <typename F>
int guarded(const char* where, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    const std::string_view what = e.what();
    slurm_error("railyard: %s", e.what() + (what.starts_with("railyard: ") ? 10 : 0));
  } catch (...) {
    slurm_error("railyard: unexpected error in %s", where);
  }
  return kFail;
}

int plan_step(spank_t sp) {
  State& s = state();
  const uint32_t step = item<uint32_t>(sp, S_JOB_STEPID, "the step id");
  if (step == SLURM_BATCH_SCRIPT || step == SLURM_EXTERN_CONT || step == SLURM_INTERACTIVE_STEP) {
    return 0;
  }
  if (!s.admin) throw std::invalid_argument(s.admin_error);
  const std::vector<railyard::UserSetting> settings = user_settings(sp);
  railyard::Policy policy = railyard::resolve_policy(*s.admin, settings);
  if (!policy.enabled) return 0;

  const std::string node = node_name(sp);
  const railyard::StepGpus gpus =
      railyard::step_gpus_from_env(job_env(sp, "SLURM_STEP_GPUS"), job_env(sp, "SLURM_JOB_GPUS"),
                                   job_env(sp, "CUDA_VISIBLE_DEVICES"));
  std::optional<railyard::DriverInfo> driver;
  if (!policy.required_cuda.empty() && !gpus.step_gpus.empty()) {
    driver = railyard::read_driver();
    railyard::check_driver(node, driver, railyard::CudaVersion::parse(policy.required_cuda));
  }

  railyard::Topology topology = s.admin->topology_path.empty()
                                    ? railyard::discover_topology()
                                    : railyard::load_topology_xml(s.admin->topology_path);
  // A cached XML is this node's, but has no device minors: Slurm's indices may need them.
  if (!s.admin->topology_path.empty()) railyard::add_nvidia_driver_info(topology);
  railyard::PlanRequest request;
  request.step_gpus = gpus.step_gpus;
  request.cuda_names = gpus.cuda_names;
  request.local_tasks =
      static_cast<int>(item<uint32_t>(sp, S_JOB_LOCAL_TASK_COUNT, "the local task count"));
  request.node_name = node;
  request.policy = policy;
  s.plan = railyard::plan_step(topology, request);
  // Shown in the verbose report: the check passed against this driver.
  if (driver) s.plan->driver = driver->version + "(CUDA<=" + driver->max_cuda.str() + ")";
  for (const std::string& warning : s.plan->warnings) slurm_info("railyard: %s", warning.c_str());
  s.active = true;
  return 0;
}

// hwloc dlopens all of its plugins at the first topology it makes; the GL, OpenCL and libxml2
// ones pull in X11, OpenCL and ICU and cost 3-25 ms per step, and none is needed (the
// built-in XML parser reads cached topologies; PCI discovery stays). Only this slurmstepd's
// own environment changes, once, before its first topology; an admin's setting is kept.
void skip_unneeded_hwloc_plugins() {
  setenv("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl,hwloc_opencl,hwloc_xml_libxml", 0);
}

railyard::CpuSet current_affinity() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
    throw std::runtime_error("sched_getaffinity failed");
  }
  std::string list;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    if (!list.empty()) list += ',';
    list += std::to_string(cpu);
  }
  return railyard::CpuSet::parse(list);
}

void set_affinity(const railyard::CpuSet& cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int cpu : cpus.members()) {
    if (cpu < CPU_SETSIZE) CPU_SET(cpu, &mask);
  }
  if (sched_setaffinity(0, sizeof mask, &mask) != 0) {
    throw std::runtime_error("sched_setaffinity to " + cpus.to_string() + " failed");
  }
}

// The task's index into the step's plan, from Slurm's local task id.
size_t planned_task(spank_t sp, const railyard::StepPlan& plan) {
  const int task = item<int>(sp, S_TASK_ID, "the local task id");
  if (task < 0 || static_cast<size_t>(task) >= plan.tasks.size()) {
    throw std::runtime_error("local task " + std::to_string(task) + " is not in the step's plan");
  }
  return static_cast<size_t>(task);
}

// Slurm's allocation is the outer bound: the planned cpus are narrowed to it, and when they lie
// wholly outside it the task keeps what Slurm gave it. `applied` then names the cpus it got.
void bind_cpus(railyard::TaskPlan& applied) {
  const railyard::CpuSet allowed = current_affinity();
  const railyard::CpuSet wanted = railyard::CpuSet::parse(applied.cpus) & allowed;
  if (!wanted.empty()) {
    set_affinity(wanted);
    applied.cpus = wanted.to_string();
  } else {
    applied.cpus = allowed.to_string();
  }
  if (applied.env.contains(railyard::contract_env::kCpus)) {
    applied.env[railyard::contract_env::kCpus] = applied.cpus;
  }
}

// Sets the task's variables; one the job already sets is kept unless the plugin owns it or the
// policy forces it. Returns the kept names, comma-separated.
std::string set_task_env(spank_t sp, const railyard::TaskPlan& applied, bool force) {
  std::string kept;
  for (const auto& [name, value] : applied.env) {
    if (!railyard::safe_env_name(name) || !railyard::safe_env_value(value)) {
      throw std::runtime_error("refusing to set " + name + ": unsafe name or value");
    }
    if (!railyard::plugin_owned_env(name) && !force && job_env(sp, name.c_str())) {
      kept += (kept.empty() ? "" : ",") + name;
      continue;
    }
    if (spank_setenv(sp, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
      throw std::runtime_error("cannot set " + name);
    }
  }
  return kept;
}

// The verbose report on the task's stderr; the step's warnings once, from task 0.
void report_task(spank_t sp, railyard::StepPlan& plan, const railyard::TaskPlan& applied,
                 size_t task, const std::string& kept) {
  // Slurm's name for the node is in the task's environment only from task_init on.
  if (auto name = job_env(sp, "SLURMD_NODENAME"); name && !name->empty()) plan.node_name = *name;
  if (task == 0) {
    for (const std::string& warning : plan.warnings) {
      std::fprintf(stderr, "railyard: warning: %s\n", warning.c_str());
    }
  }
  std::string line = railyard::format_task_report(plan, applied);
  if (!kept.empty()) line += " kept=" + kept;
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

int apply_task(spank_t sp) {
  State& s = state();
  if (s.step_failed) return kFail;  // user_init has said why
  if (!s.active || !s.plan) return 0;
  const size_t task = planned_task(sp, *s.plan);
  railyard::TaskPlan applied = s.plan->tasks[task];
  const railyard::Policy& policy = s.plan->policy;
  if (policy.cpu_bind && !applied.cpus.empty()) bind_cpus(applied);
  const std::string kept = set_task_env(sp, applied, policy.force);
  if (policy.verbose) report_task(sp, *s.plan, applied, task, kept);
  return 0;
}

}  // namespace

RAILYARD_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("slurm_spank_init", [&] {
    const spank_context_t context = spank_context();
    if (context != S_CTX_LOCAL && context != S_CTX_ALLOCATOR && context != S_CTX_REMOTE) {
      return 0;
    }
    if (context == S_CTX_REMOTE) skip_unneeded_hwloc_plugins();
    for (auto& o : registered_options()) {
      if (spank_option_register(sp, &o.option) != ESPANK_SUCCESS) {
        throw std::runtime_error("cannot register option --" + o.name);
      }
    }
    State& s = state();
    try {
      s.admin = railyard::parse_admin_args(std::vector<std::string>(av, av + ac));
    } catch (const std::invalid_argument& e) {
      s.admin_error = e.what();
      // srun/sbatch/salloc stop here with the message; slurmstepd waits for user_init, where
      // only real job steps fail.
      if (context != S_CTX_REMOTE) throw;
    }
    return 0;
  });
}

RAILYARD_EXPORT int slurm_spank_user_init(spank_t sp, int, char**) {
  if (guarded("slurm_spank_user_init", [&] { return plan_step(sp); }) != 0) {
    state().step_failed = true;
  }
  return 0;
}

RAILYARD_EXPORT int slurm_spank_task_init(spank_t sp, int, char**) {
  return guarded("slurm_spank_task_init", [&] { return apply_task(sp); });
}
