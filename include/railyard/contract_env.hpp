#pragma once
// The names of the contract between the SPANK plugin and the runtime (docs/architecture.md,
// docs/user.md): the variables the plugin sets for each task to say what it decided, and the
// runtime reads for its device choice, logs and metrics. Both sides use these constants only.

namespace railyard::contract_env {

inline constexpr char kPrefix[] = "RAILYARD_";  // every variable the plugin sets starts so
inline constexpr char kLocalRank[] = "RAILYARD_LOCAL_RANK";  // the task's rank on its node
inline constexpr char kGpuPci[] = "RAILYARD_GPU_PCI";        // PCI bus ids of its GPUs, own first
inline constexpr char kNic[] = "RAILYARD_NIC";        // the NIC ports chosen, comma-separated
inline constexpr char kPolicy[] = "RAILYARD_POLICY";  // the binding policy, as one line
inline constexpr char kCpus[] = "RAILYARD_CPUS";      // the CPU list it was bound to

}  // namespace railyard::contract_env
