#pragma once
// Preemption: signal handlers that only set a flag, the per-step agreement between ranks, and
// the job's self-requeue through libslurm.

#include <cstdint>
#include <string>

namespace railyard {

class Communicator;

enum class StopAction : int {
  kNone = 0,
  kSaveExit = 1,     // save, then exit (Slurm requeues where PreemptMode=REQUEUE)
  kSaveRequeue = 2,  // save, requeue the job ourselves, then exit (time limit)
};

// Documented process exit codes of railyard-train.
namespace exit_code {
constexpr int kOk = 0;
constexpr int kFailure = 1;
constexpr int kUsage = 2;     // bad option or input
constexpr int kStopped = 3;   // saved a checkpoint and stopped on a signal
constexpr int kRequeued = 4;  // saved, requeued itself, stopped
}  // namespace exit_code

// Installs handlers for the given signals. A handled signal records its action; the strongest
// action seen wins, and signals during a save change nothing already decided.
class SignalWatcher {
 public:
  // `spec` like "TERM=exit,USR1=requeue,INT=exit"; throws std::invalid_argument naming the
  // bad entry.
  explicit SignalWatcher(const std::string& spec);
  ~SignalWatcher();  // restores the previous handlers
  StopAction pending() const;
  int last_signal() const;  // 0 when none
};

// Collective: every rank passes its local action; all get the strongest (one tiny all-reduce).
StopAction agree_stop(Communicator& comm, StopAction local);

// Requeues the current Slurm job (SLURM_JOB_ID) via libslurm's slurm_requeue. Returns false and
// sets `error` when not in a Slurm job or when Slurm refuses.
bool requeue_self(std::string* error);

}  // namespace railyard
