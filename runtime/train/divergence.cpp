#include "railyard/divergence.hpp"

#include <cmath>
#include <cstdio>

#include "railyard/communicator.hpp"

namespace railyard {

bool step_diverged(Communicator& comm, double loss, double grad_norm) {
  const bool mine = !std::isfinite(loss) || !std::isfinite(grad_norm);
  return comm.allreduce_max(mine ? 1 : 0) != 0;
}

std::string divergence_message(int64_t step, double loss, double grad_norm,
                               const std::string& newest_checkpoint) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "training diverged at step %lld: loss %g, gradient norm %g",
                static_cast<long long>(step), loss, grad_norm);
  return std::string(buf) + "; nothing of this step was saved (" +
         (newest_checkpoint.empty() ? std::string("no checkpoint was written")
                                    : "the newest checkpoint is " + newest_checkpoint) +
         "); lower --lr, raise --warmup or set --clip, then resume";
}

}  // namespace railyard
