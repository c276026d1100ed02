#include "railyard/launcher.hpp"

#include <cstdlib>

#include "railyard/env.hpp"

namespace railyard {
namespace {

bool has_env(const char* name) {
  return std::getenv(name) != nullptr;
}

int env_int(const char* name, int fallback) {
  const auto v = env_value(name);
  if (!v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v->c_str(), &end, 10);
  return (end != nullptr && *end == '\0') ? static_cast<int>(n) : fallback;
}

}  // namespace

std::string detect_launcher() {
  // mpirun first: an mpirun inside a Slurm allocation starts its daemons as a step, so the
  // ranks inherit SLURM_STEP_ID as well.
  if (has_env("OMPI_COMM_WORLD_SIZE")) return "mpirun";
  if (has_env("SLURM_STEP_ID") &&
      (has_env("PMIX_RANK") || has_env("PMI_RANK") || has_env("SLURM_PROCID"))) {
    return "srun";
  }
  if (has_env("PMIX_RANK") || has_env("PMI_RANK")) return "mpirun";
  return "none";
}

std::string missing_pmi_message() {
  // srun sets SLURM_STEP_ID and SLURM_PROCID for every task; the MPI plugin it loads (--mpi=pmix,
  // pmi2) adds the PMI variables that MPI_Init needs to find its peers. Without them Open MPI
  // aborts with advice to rebuild it, which is not the fix.
  if (!has_env("SLURM_STEP_ID") || !has_env("SLURM_PROCID")) return "";
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_FD"}) {
    if (has_env(name)) return "";
  }
  const std::optional<std::string> mpi = env_value("SLURM_MPI_TYPE");
  return std::string("this Slurm job step was started without PMIx") +
         (mpi ? " (srun --mpi=" + *mpi + ")" : std::string()) +
         ", so MPI cannot start the ranks: launch with 'srun --mpi=pmix railyard-train ...' "
         "(admins: MpiDefault=pmix in slurm.conf makes it the default; 'srun --mpi=list' shows "
         "the MPI plugins of this cluster)";
}

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    int r = env_int(name, -1);
    if (r >= 0) return r;
  }
  return 0;
}

}  // namespace railyard
