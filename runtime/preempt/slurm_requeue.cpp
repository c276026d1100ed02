#include <unistd.h>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "railyard/preempt.hpp"

#if RAILYARD_HAVE_SLURM
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <mutex>
#endif

namespace railyard {

bool requeue_self(std::string* error) {
  std::string scratch;
  std::string& err = error != nullptr ? *error : scratch;
  const char* id = std::getenv("SLURM_JOB_ID");
  if (id == nullptr || *id == '\0') {
    err = "requeue: not inside a Slurm job (SLURM_JOB_ID is unset); resubmit the job yourself";
    return false;
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long job = std::strtoull(id, &end, 10);
  if (errno != 0 || end == id || *end != '\0' || job == 0 || job > UINT32_MAX) {
    err = std::string("requeue: SLURM_JOB_ID='") + id + "' is not a job number";
    return false;
  }
#if RAILYARD_HAVE_SLURM
  // libslurm exits the process when it cannot read slurm.conf; check the common cause first.
  const char* conf = std::getenv("SLURM_CONF");
  if (conf != nullptr && *conf != '\0' && access(conf, R_OK) != 0) {
    err = std::string("requeue: SLURM_CONF=") + conf + " is not readable; cannot reach Slurm";
    return false;
  }
  static std::once_flag init;
  std::call_once(init, [] { slurm_init(nullptr); });
  if (slurm_requeue(static_cast<uint32_t>(job), 0) != SLURM_SUCCESS) {
    const int code = slurm_get_errno();
    err = "requeue: slurm_requeue(" + std::to_string(job) + ") failed: " + slurm_strerror(code) +
          " (a job submitted with --no-requeue cannot be requeued)";
    return false;
  }
  return true;
#else
  err =
      "requeue: this railyard was built without libslurm (install libslurm-dev and rebuild), "
      "so job " +
      std::to_string(job) + " cannot requeue itself; run 'scontrol requeue " + std::to_string(job) +
      "'";
  return false;
#endif
}

}  // namespace railyard
