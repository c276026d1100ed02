#include <string>

#include "railyard/preempt.hpp"
#include "slurm_job_id.hpp"

#if RAILYARD_HAVE_SLURM
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#endif

namespace railyard {

bool requeue_self(std::string* error) {
  std::string scratch;
  std::string& err = error != nullptr ? *error : scratch;
  const auto job = slurm_job::current_job(err);
  if (!job) {
    err = "requeue: " + err + "; resubmit the job yourself";
    return false;
  }
#if RAILYARD_HAVE_SLURM
  if (!slurm_job::init_libslurm(err)) {
    err = "requeue: " + err;
    return false;
  }
  if (slurm_requeue(*job, 0) != SLURM_SUCCESS) {
    err = "requeue: slurm_requeue(" + std::to_string(*job) +
          ") failed: " + slurm_strerror(slurm_get_errno()) +
          " (a job submitted with --no-requeue cannot be requeued)";
    return false;
  }
  return true;
#else
  err =
      "requeue: this railyard was built without libslurm (install libslurm-dev and rebuild), "
      "so job " +
      std::to_string(*job) + " cannot requeue itself; run 'scontrol requeue " +
      std::to_string(*job) + "'";
  return false;
#endif
}

}  // namespace railyard
