#pragma once
// Divergence: a step whose loss or gradient norm is not finite. Such a state must never be
// saved (it would pass for the newest checkpoint and push out the finite ones), so the run
// stops at that step with exit_code::kDiverged, keeping the checkpoints it already has.

#include <cstdint>
#include <string>

namespace railyard {

class Communicator;

// Collective: true on every rank when any rank's loss or gradient norm is NaN or infinite
// (the ranks agree, so all stop at the same step).
bool step_diverged(Communicator& comm, double loss, double grad_norm);

// What to print: the step, both values and what to change.
std::string divergence_message(int64_t step, double loss, double grad_norm,
                               const std::string& newest_checkpoint);

}  // namespace railyard
