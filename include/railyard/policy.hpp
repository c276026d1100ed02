#pragma once
// The binding policy: what the planner decides and how the decision is written into a task's
// environment. The SPANK glue maps plugstack.conf arguments and srun/sbatch options onto it;
// railyard-topo maps its command-line options onto it. Knows nothing of Slurm.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace railyard {

// How a task's GPU is chosen among the step's GPUs.
enum class GpuChoice {
  kClosest,  // the GPU nearest the task's allowed cpus; ties go by local rank
  kRank,     // the GPU at the task's local rank (modulo the GPU count)
};

// What CUDA_VISIBLE_DEVICES shows a task.
enum class VisibleDevices {
  kRotate,   // the task's own GPU(s) first, then the step's other GPUs (keeps NVLink/P2P)
  kIsolate,  // only the task's own GPU(s)
  kAll,      // the step's GPUs as Slurm gave them
};

// How Slurm numbers a node's GPUs (SLURM_STEP_GPUS, SLURM_JOB_GPUS): in the order of its gres
// device list, which gres.conf decides. gpu_numbering.hpp maps the numbers to GPUs.
enum class GpuIndex {
  kPci,    // i is the i-th GPU in PCI bus order: AutoDetect=nvml (Slurm >= 21.08 sorts so)
  kMinor,  // i is the GPU of the i-th device minor: File=/dev/nvidia[0-N] without AutoDetect
};

struct Policy {
  bool enabled = true;  // off: the plugin changes nothing
  GpuChoice gpu_choice = GpuChoice::kClosest;
  VisibleDevices visible_devices = VisibleDevices::kRotate;
  bool cpu_bind = true;  // set the task's CPU affinity to the planned cpus
  bool net_env = true;   // set NCCL_*, UCX_*, OMPI_MCA_btl_tcp_if_include
  // Glob patterns (fnmatch) on RDMA device names ("mlx5_*"); a NIC is used when it matches an
  // include pattern (or there are none) and no exclude pattern.
  std::vector<std::string> nic_include;
  std::vector<std::string> nic_exclude;
  // NCCL_SOCKET_IFNAME / OMPI_MCA_btl_tcp_if_include override; empty: the chosen NIC's netdev.
  std::string socket_ifname;
  // NCCL_NET_GDR_LEVEL (LOC, PIX, PXB, PHB, SYS); empty ("auto"): not set, NCCL decides.
  std::string gdr_level;
  bool verbose = false;       // one report line per task on stderr
  std::string required_cuda;  // "12.4": the CUDA version the job needs; empty: no check
  bool force = false;         // admin: overwrite variables the user already set
  // Admin only, a fact of the node's gres.conf; nullopt: not stated, read as kPci (with a
  // warning on nodes whose device minors are out of PCI bus order).
  std::optional<GpuIndex> gpu_index;
};

// Parsers for option and argument values. Each throws std::invalid_argument with a message
// naming the value and the allowed set; callers prefix the option name.
GpuChoice parse_gpu_choice(std::string_view value);            // closest | rank
VisibleDevices parse_visible_devices(std::string_view value);  // rotate | isolate | all
bool parse_switch(std::string_view value);                     // on|off|yes|no|true|false|1|0
// Comma-separated glob patterns of RDMA device names; characters [A-Za-z0-9_.:*?[]!-].
std::vector<std::string> parse_nic_patterns(std::string_view value);
// Comma-separated interface names or NCCL prefixes ("ib", "^docker", "=eth0"), at most 15
// characters each from [A-Za-z0-9_.:-].
std::string parse_socket_ifname(std::string_view value);
std::string parse_gdr_level(std::string_view value);     // auto | LOC | PIX | PXB | PHB | SYS
std::string parse_cuda_version(std::string_view value);  // MAJOR[.MINOR], e.g. "12" or "12.4"
GpuIndex parse_gpu_index(std::string_view value);        // pci | minor

std::string_view to_string(GpuChoice choice);
std::string_view to_string(VisibleDevices visible);
std::string_view to_string(GpuIndex index);  // "pci", "minor"

// Whether the RDMA device `name` passes the policy's include/exclude patterns.
bool nic_allowed(const Policy& policy, std::string_view name);

// A short description for RAILYARD_POLICY, e.g. "gpu=closest,visible=rotate,cpu=on,net=on".
std::string describe(const Policy& policy);

}  // namespace railyard
