#include <string>

#include "railyard/preempt.hpp"
#include "slurm_job_id.hpp"

#if RAILYARD_HAVE_SLURM
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#endif

namespace railyard {

PreemptQuery job_is_preempted() {
  PreemptQuery q;
  const auto job = slurm_job::current_job(q.error);
  if (!job) return q;
#if RAILYARD_HAVE_SLURM
  if (!slurm_job::init_libslurm(q.error)) return q;
  job_info_msg_t* info = nullptr;
  if (slurm_load_job(&info, *job, SHOW_ALL) != SLURM_SUCCESS || info == nullptr) {
    q.error =
        "slurm_load_job(" + std::to_string(*job) + ") failed: " + slurm_strerror(slurm_get_errno());
    return q;
  }
  if (info->record_count < 1) {
    q.error = "Slurm knows no job " + std::to_string(*job);
  } else {
    const slurm_job_info_t& j = info->job_array[0];
    q.known = true;
    // Set while the job is in its preemption grace time; a user's scancel leaves it unset.
    q.preempted = j.preempt_time != 0;
    q.requeue_allowed = j.requeue != 0;
  }
  slurm_free_job_info_msg(info);
#else
  q.error =
      "built without libslurm (install libslurm-dev and rebuild); cannot ask Slurm about job " +
      std::to_string(*job);
#endif
  return q;
}

}  // namespace railyard
