#include "railyard/stop_requeue.hpp"

#include <cstdlib>

#include "railyard/communicator.hpp"

namespace railyard {

int requeue_if_asked(Communicator& comm, StopAction stop,
                     const std::function<void(const std::string&)>& warn, std::string* job) {
  int ok = 0;
  bool want = stop == StopAction::kSaveRequeue;
  std::string err;
  if (comm.rank() == 0 && !want) {
    const PreemptQuery q = job_is_preempted();
    want = q.known && q.preempted && q.requeue_allowed;
  }
  if (comm.rank() == 0 && want) {
    ok = requeue_self(&err) ? 1 : 0;
    if (!ok) warn("requeue failed: " + err + "; stopping without a requeue");
  }
  comm.broadcast(&ok, sizeof ok, 0);
  if (!ok) return exit_code::kStopped;
  const char* id = std::getenv("SLURM_JOB_ID");
  *job = id != nullptr ? id : "?";
  return exit_code::kRequeued;
}

}  // namespace railyard
