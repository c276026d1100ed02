#include "slurm_job_id.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

#if RAILYARD_HAVE_SLURM
#include <slurm/slurm.h>

#include <mutex>
#endif

namespace railyard::slurm_job {

std::optional<unsigned> current_job(std::string& error) {
  const char* id = std::getenv("SLURM_JOB_ID");
  if (id == nullptr || *id == '\0') {
    error = "not inside a Slurm job (SLURM_JOB_ID is unset)";
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long job = std::strtoull(id, &end, 10);
  if (errno != 0 || end == id || *end != '\0' || job == 0 || job > UINT32_MAX) {
    error = std::string("SLURM_JOB_ID='") + id + "' is not a job number";
    return std::nullopt;
  }
  return static_cast<unsigned>(job);
}

#if RAILYARD_HAVE_SLURM
bool init_libslurm(std::string& error) {
  const char* conf = std::getenv("SLURM_CONF");
  if (conf != nullptr && *conf != '\0' && access(conf, R_OK) != 0) {
    error = std::string("SLURM_CONF=") + conf + " is not readable; cannot reach Slurm";
    return false;
  }
  static std::once_flag init;
  std::call_once(init, [] { slurm_init(nullptr); });
  return true;
}
#endif

}  // namespace railyard::slurm_job
