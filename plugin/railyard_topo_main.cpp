// railyard-topo: the node's topology and the binding plan the plugin would apply, for admins
// checking a node or a cached XML and for users checking a job's layout before submitting.
//
//   railyard-topo show [--topology FILE.xml] [--json]
//   railyard-topo plan --ntasks N [--gpus LIST] [--cpus-per-task N | --task-cpus L;L;...]
//                      [--topology FILE.xml] [policy options] [--json]
//
// Exit status: 0 success, 1 the topology cannot be loaded, 2 a bad command line.

#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "railyard/cpuset.hpp"
#include "railyard/exit_code.hpp"
#include "railyard/planner.hpp"
#include "railyard/policy.hpp"
#include "railyard/strings.hpp"
#include "railyard/topology.hpp"
#include "railyard/usage_error.hpp"

namespace po = boost::program_options;

namespace railyard {
namespace {

const char* kUsage =
    "usage: railyard-topo show [--topology FILE.xml] [--json]\n"
    "       railyard-topo plan --ntasks N [--gpus LIST] [--cpus-per-task N | --task-cpus "
    "LIST;LIST...]\n"
    "                          [--topology FILE.xml] [policy options] [--json]\n"
    "       railyard-topo {show|plan} --help\n";

// Runs a value parser, naming the option in its message.
template <typename Parse>
auto option_value(const char* option, const std::string& value, Parse parse) {
  try {
    return parse(value);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--") + option + ": " + e.what());
  }
}

Topology load(const po::variables_map& vm) {
  return vm.count("topology") ? load_topology_xml(vm["topology"].as<std::string>())
                              : discover_topology();
}

po::variables_map parse(const po::options_description& options, int argc, char** argv) {
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(options).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

std::string hex4(unsigned v) {
  char text[8];
  std::snprintf(text, sizeof text, "%04x", v);
  return text;
}

nlohmann::ordered_json topology_json(const Topology& t) {
  nlohmann::ordered_json j;
  j["source"] = t.source;
  j["cpus"] = t.cpuset;
  j["gpus"] = nlohmann::ordered_json::array();
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    const Gpu& g = t.gpus[i];
    j["gpus"].push_back({{"index", i},
                         {"pci", g.pci_bus_id},
                         {"id", hex4(g.vendor_id) + ":" + hex4(g.device_id)},
                         {"name", g.name},
                         {"uuid", g.uuid},
                         {"minor", g.minor},
                         {"numa", g.numa_node},
                         {"cpus", g.cpuset}});
  }
  j["nics"] = nlohmann::ordered_json::array();
  for (const Nic& n : t.nics) {
    j["nics"].push_back({{"name", n.name},
                         {"pci", n.pci_bus_id},
                         {"ports", n.ports},
                         {"netdevs", n.netdevs},
                         {"efa", n.efa},
                         {"numa", n.numa_node},
                         {"cpus", n.cpuset}});
  }
  j["interfaces"] = nlohmann::ordered_json::array();
  for (const NetInterface& n : t.interfaces) {
    j["interfaces"].push_back({{"name", n.name}, {"pci", n.pci_bus_id}, {"numa", n.numa_node}});
  }
  j["numa_nodes"] = nlohmann::ordered_json::array();
  for (const NumaNode& n : t.numa_nodes) {
    j["numa_nodes"].push_back({{"os_index", n.os_index}, {"cpus", n.cpuset}});
  }
  j["gpu_nic"] = nlohmann::ordered_json::array();
  for (const auto& row : t.gpu_nic) {
    nlohmann::ordered_json r = nlohmann::ordered_json::array();
    for (Distance d : row) r.push_back(std::string(to_string(d)));
    j["gpu_nic"].push_back(r);
  }
  return j;
}

std::string numa_text(int node) {
  return node < 0 ? "?" : std::to_string(node);
}

void print_topology(const Topology& t) {
  std::cout << "topology: " << t.source << ", cpus " << t.cpuset << "\n\nGPUs (" << t.gpus.size()
            << ", PCI bus order):\n";
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    const Gpu& g = t.gpus[i];
    std::cout << "  " << i << "  " << g.pci_bus_id << "  [" << hex4(g.vendor_id) << ":"
              << hex4(g.device_id) << "]  " << (g.name.empty() ? "?" : g.name) << "  NUMA "
              << numa_text(g.numa_node) << "  cpus " << g.cpuset
              << (g.minor < 0 ? "" : "  /dev/nvidia" + std::to_string(g.minor))
              << (g.uuid.empty() ? "" : "  " + g.uuid) << "\n";
  }
  std::cout << "\nRDMA NICs (" << t.nics.size() << "):\n";
  for (const Nic& n : t.nics) {
    std::vector<std::string> ports;
    for (unsigned p : n.ports) ports.push_back(std::to_string(p));
    std::cout << "  " << n.name << "  " << (n.pci_bus_id.empty() ? "-" : n.pci_bus_id) << "  ports "
              << join(ports, ",") << "  netdev " << (n.netdevs.empty() ? "-" : join(n.netdevs, ","))
              << "  NUMA " << numa_text(n.numa_node) << (n.efa ? "  EFA" : "") << "\n";
  }
  std::cout << "\nNetwork interfaces (" << t.interfaces.size() << "):\n";
  for (const NetInterface& n : t.interfaces) {
    std::cout << "  " << n.name << "  " << (n.pci_bus_id.empty() ? "-" : n.pci_bus_id) << "  NUMA "
              << numa_text(n.numa_node) << "\n";
  }
  std::cout << "\nNUMA nodes (" << t.numa_nodes.size() << "):\n";
  for (const NumaNode& n : t.numa_nodes) {
    std::cout << "  " << n.os_index << "  cpus " << n.cpuset << "\n";
  }
  if (t.gpus.empty() || t.nics.empty()) return;
  size_t width = 6;
  for (const Nic& n : t.nics) width = std::max(width, n.name.size() + 2);
  auto cell = [&](const std::string& text) {
    return text + std::string(width > text.size() ? width - text.size() : 1, ' ');
  };
  std::cout << "\nGPU-by-NIC distance:\n" << cell("");
  std::string header;
  for (const Nic& n : t.nics) header += cell(n.name);
  std::cout << header.substr(0, header.find_last_not_of(' ') + 1) << "\n";
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    std::cout << cell("GPU" + std::to_string(g));
    std::string line;
    for (Distance d : t.gpu_nic[g]) line += cell(std::string(to_string(d)));
    std::cout << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
  }
  std::cout << "\n  PIX  same PCIe switch       PXB  across PCIe switches\n"
               "  PHB  same PCIe host bridge  NODE same NUMA node\n"
               "  SYS  across NUMA nodes (socket interconnect)\n";
}

int show(int argc, char** argv) {
  po::options_description options("railyard-topo show");
  options.add_options()("help,h", "this help")(
      "topology", po::value<std::string>()->value_name("FILE.xml"),
      "hwloc XML to read (lstopo --of xml); default: discover this machine")(
      "json", "print one JSON object");
  const po::variables_map vm = parse(options, argc, argv);
  if (vm.count("help")) {
    std::cout << kUsage << "\n" << options;
    return 0;
  }
  const Topology t = load(vm);
  if (vm.count("json")) {
    std::cout << topology_json(t).dump(2) << "\n";
  } else {
    print_topology(t);
  }
  return 0;
}

// Slurm's block distribution: task t gets the t-th run of n cpus in OS index order.
std::vector<std::string> block_cpus(const Topology& t, int tasks, int per_task) {
  const std::vector<int> cpus = CpuSet::parse(t.cpuset).members();
  const size_t need = static_cast<size_t>(tasks) * static_cast<size_t>(per_task);
  if (need > cpus.size()) {
    throw UsageError("--cpus-per-task " + std::to_string(per_task) + " with --ntasks " +
                     std::to_string(tasks) + " needs " + std::to_string(need) +
                     " cpus; the node has " + std::to_string(cpus.size()));
  }
  std::vector<std::string> lists;
  for (int task = 0; task < tasks; ++task) {
    std::string list;
    for (int k = 0; k < per_task; ++k) {
      list += (k > 0 ? "," : "") + std::to_string(cpus[task * per_task + k]);
    }
    lists.push_back(CpuSet::parse(list).to_string());
  }
  return lists;
}

std::string hostname() {
  char name[256] = {0};
  return gethostname(name, sizeof name - 1) == 0 ? name : "";
}

// The policy options of `plan`, each value checked by the parser the plugin uses.
Policy policy_options(const po::variables_map& vm) {
  Policy policy;
  auto text = [&](const char* name) { return vm[name].as<std::string>(); };
  if (vm.count("gpu-choice")) {
    policy.gpu_choice = option_value("gpu-choice", text("gpu-choice"), parse_gpu_choice);
  }
  if (vm.count("visible")) {
    policy.visible_devices = option_value("visible", text("visible"), parse_visible_devices);
  }
  if (vm.count("cpu-bind"))
    policy.cpu_bind = option_value("cpu-bind", text("cpu-bind"), parse_switch);
  if (vm.count("net-env")) policy.net_env = option_value("net-env", text("net-env"), parse_switch);
  if (vm.count("nic-include")) {
    policy.nic_include = option_value("nic-include", text("nic-include"), parse_nic_patterns);
  }
  if (vm.count("nic-exclude")) {
    policy.nic_exclude = option_value("nic-exclude", text("nic-exclude"), parse_nic_patterns);
  }
  if (vm.count("socket-ifname")) {
    policy.socket_ifname =
        option_value("socket-ifname", text("socket-ifname"), parse_socket_ifname);
  }
  if (vm.count("gdr-level")) {
    policy.gdr_level = option_value("gdr-level", text("gdr-level"), parse_gdr_level);
  }
  if (vm.count("gpu-index")) {
    policy.gpu_index = option_value("gpu-index", text("gpu-index"), parse_gpu_index);
  }
  return policy;
}

// `plan`'s options.
po::options_description plan_options() {
  po::options_description options("railyard-topo plan");
  options.add_options()("help,h", "this help")("ntasks,n", po::value<int>()->value_name("N"),
                                               "local tasks in the step (required)")(
      "gpus", po::value<std::string>()->value_name("LIST"),
      "the step's GPUs as Slurm gives them (SLURM_STEP_GPUS): Slurm's indices (see "
      "--gpu-index) or MIG-/GPU- UUIDs, comma-separated; default: every GPU of the node")(
      "gpu-index", po::value<std::string>()->value_name("pci|minor"),
      "how Slurm numbers GPUs: PCI bus order (default; gres.conf AutoDetect=nvml) or device "
      "minor order (File=/dev/nvidia[0-N] alone); as plugstack.conf gpu_index=")(
      "cuda-names", po::value<std::string>()->value_name("LIST"),
      "how CUDA_VISIBLE_DEVICES names those GPUs, when Slurm renumbered them")(
      "cpus-per-task,c", po::value<int>()->value_name("N"),
      "give task t the t-th block of N cpus (Slurm's block distribution)")(
      "task-cpus", po::value<std::string>()->value_name("LIST;LIST..."),
      "each task's allowed cpus, hwloc lists separated by ';'; default: all cpus")(
      "topology", po::value<std::string>()->value_name("FILE.xml"),
      "hwloc XML to read (lstopo --of xml); default: discover this machine")(
      "node", po::value<std::string>()->value_name("NAME"), "host name in the report")(
      "gpu-choice", po::value<std::string>()->value_name("closest|rank"),
      "closest to the task's cpus (default) or by local rank")(
      "visible", po::value<std::string>()->value_name("rotate|isolate|all"),
      "what CUDA_VISIBLE_DEVICES shows (default rotate)")(
      "cpu-bind", po::value<std::string>()->value_name("on|off"), "CPU binding (default on)")(
      "net-env", po::value<std::string>()->value_name("on|off"),
      "NCCL/UCX/Open MPI network variables (default on)")(
      "nic-include", po::value<std::string>()->value_name("PATTERNS"),
      "use only RDMA devices matching these globs, e.g. mlx5_*")(
      "nic-exclude", po::value<std::string>()->value_name("PATTERNS"),
      "never use RDMA devices matching these globs")(
      "socket-ifname", po::value<std::string>()->value_name("NAME"),
      "NCCL_SOCKET_IFNAME / btl_tcp_if_include instead of the NIC's netdev")(
      "gdr-level", po::value<std::string>()->value_name("auto|LOC|PIX|PXB|PHB|SYS"),
      "NCCL_NET_GDR_LEVEL (default auto: not set)")("json", "print one JSON object");
  return options;
}

// The step `plan` describes: its tasks, cpus, GPUs and policy from the options, checked.
PlanRequest plan_request(const po::variables_map& vm, const Topology& topology) {
  const int ntasks = vm["ntasks"].as<int>();
  PlanRequest request;
  request.local_tasks = ntasks;
  request.policy = policy_options(vm);
  auto text = [&](const char* name) { return vm[name].as<std::string>(); };
  if (vm.count("task-cpus")) {
    request.task_cpus = split(text("task-cpus"), ';');
    if (request.task_cpus.size() != static_cast<size_t>(ntasks)) {
      throw UsageError("--task-cpus gives " + std::to_string(request.task_cpus.size()) +
                       " cpu lists for --ntasks " + std::to_string(ntasks));
    }
    for (const std::string& list : request.task_cpus) {
      option_value("task-cpus", list, [](const std::string& l) { return CpuSet::parse(l); });
    }
  }
  if (vm.count("gpus")) request.step_gpus = split(text("gpus"), ',');
  if (vm.count("cuda-names")) request.cuda_names = split(text("cuda-names"), ',');
  request.node_name = vm.count("node") ? text("node") : hostname();
  if (!vm.count("gpus")) {
    for (size_t i = 0; i < topology.gpus.size(); ++i)
      request.step_gpus.push_back(std::to_string(i));
  }
  if (vm.count("cpus-per-task")) {
    const int per_task = vm["cpus-per-task"].as<int>();
    if (per_task < 1) throw UsageError("--cpus-per-task must be at least 1");
    request.task_cpus = block_cpus(topology, ntasks, per_task);
  }
  return request;
}

int plan(int argc, char** argv) {
  const po::options_description options = plan_options();
  const po::variables_map vm = parse(options, argc, argv);
  if (vm.count("help")) {
    std::cout << kUsage << "\n" << options;
    return 0;
  }
  if (!vm.count("ntasks")) throw UsageError("--ntasks is required");
  if (vm.count("cpus-per-task") && vm.count("task-cpus")) {
    throw UsageError("--cpus-per-task and --task-cpus exclude each other");
  }
  const int ntasks = vm["ntasks"].as<int>();
  if (ntasks < 1 || ntasks > 4096) {
    throw UsageError("--ntasks " + std::to_string(ntasks) + ": allowed 1 to 4096");
  }
  const Topology topology = load(vm);
  const PlanRequest request = plan_request(vm, topology);
  StepPlan step;
  try {
    step = plan_step(topology, request);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  for (const std::string& warning : step.warnings) {
    std::cerr << "railyard-topo: warning: " << warning << "\n";
  }
  if (vm.count("json")) {
    std::cout << plan_to_json(step) << "\n";
    return 0;
  }
  for (const TaskPlan& task : step.tasks) {
    std::cout << format_task_report(step, task) << "\n";
    for (const auto& [name, value] : task.env) std::cout << "    " << name << "=" << value << "\n";
  }
  return 0;
}

int run(int argc, char** argv) {
  try {
    if (argc < 2) throw UsageError("no command given");
    const std::string command = argv[1];
    if (command == "-h" || command == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (command == "show") return show(argc - 1, argv + 1);
    if (command == "plan") return plan(argc - 1, argv + 1);
    throw UsageError("unknown command '" + command + "': allowed show, plan");
  } catch (const UsageError& e) {
    std::cerr << "railyard-topo: " << e.what() << "\n" << kUsage;
    return exit_code::kUsage;
  } catch (const std::exception& e) {
    // Topology errors carry the plugin's "railyard: " prefix; the command names itself.
    std::string message = e.what();
    if (message.rfind("railyard: ", 0) == 0) message.erase(0, 10);
    std::cerr << "railyard-topo: " << message << "\n";
    return exit_code::kFailure;
  }
}

}  // namespace
}  // namespace railyard

int main(int argc, char** argv) {
  return railyard::run(argc, argv);
}
