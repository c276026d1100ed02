#pragma once
// The current job's id from SLURM_JOB_ID, and libslurm's one-time initialisation.

#include <optional>
#include <string>

namespace railyard::slurm_job {

// The job id, or nullopt with `error` saying why (unset or malformed).
std::optional<unsigned> current_job(std::string& error);

#if RAILYARD_HAVE_SLURM
// slurm_init once; false with `error` when slurm.conf is unreadable (libslurm would exit).
bool init_libslurm(std::string& error);
#endif

}  // namespace railyard::slurm_job
