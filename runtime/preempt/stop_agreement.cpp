#include <stdexcept>
#include <string>

#include "railyard/communicator.hpp"
#include "railyard/preempt.hpp"

namespace railyard {

StopAction agree_stop(Communicator& comm, StopAction local) {
  // StopAction is ordered by strength, so MAX gives every rank the strongest request: a signal
  // seen by one rank only still stops all of them at the same step.
  const int64_t agreed = comm.allreduce_max(static_cast<int64_t>(local));
  if (agreed < static_cast<int64_t>(StopAction::kNone) ||
      agreed > static_cast<int64_t>(StopAction::kSaveRequeue)) {
    throw std::runtime_error("agree_stop: ranks disagree on the protocol (got action " +
                             std::to_string(agreed) + "); are all ranks the same railyard build?");
  }
  return static_cast<StopAction>(agreed);
}

}  // namespace railyard
