#pragma once
// The end of an agreed stop (preempt.hpp): whether the job requeues itself.

#include <functional>
#include <string>

#include "railyard/preempt.hpp"

namespace railyard {

class Communicator;

// Collective, once the state to continue from is durable (saved, or nothing trained since the
// newest checkpoint). A 'requeue' action (time limit) always asks for a requeue; an 'exit'
// action only when Slurm is preempting the job (with PreemptMode=REQUEUE Slurm marks a job whose
// batch script ends within GraceTime COMPLETED instead of requeueing it; a user's scancel is no
// preemption, so that run just stops). Rank 0 asks Slurm; a failure goes to `warn` and the run
// stops without a requeue. Returns exit_code::kRequeued with `job` set, else kStopped.
int requeue_if_asked(Communicator& comm, StopAction stop,
                     const std::function<void(const std::string&)>& warn, std::string* job);

}  // namespace railyard
