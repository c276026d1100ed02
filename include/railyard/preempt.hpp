#pragma once
// Preemption: signal handlers that only set a flag, the per-step agreement between ranks, and
// the job's self-requeue through libslurm.
//
// The protocol (docs/checkpoint-format.md, "Preemption"): at every step boundary each rank
// passes SignalWatcher::pending() to agree_stop; when the agreed action is not kNone, every rank
// saves the same step, rank 0 calls requeue_self for kSaveRequeue once the checkpoint is
// durable, and every rank exits with exit_code::kStopped or kRequeued. The decision is taken
// once: signals that arrive during the save (Slurm's TERM after a requeue, a second scancel)
// still only set the flag, so they cannot interrupt the save or change what was decided.

#include <cstdint>
#include <string>

#include "railyard/exit_code.hpp"  // kStopped, kRequeued

namespace railyard {

class Communicator;

// Ordered by strength: a stronger action overrides a weaker one (all-reduce MAX).
enum class StopAction : int {
  kNone = 0,
  kSaveExit = 1,     // save, then exit (Slurm requeues where PreemptMode=REQUEUE)
  kSaveRequeue = 2,  // save, requeue the job ourselves, then exit (time limit)
};

// "none", "exit" or "requeue" (the words of a SignalWatcher spec).
const char* stop_action_name(StopAction action);

// Installs handlers (SA_RESTART) for the given signals. A handled signal records its action in
// an atomic flag and nothing else; the strongest action seen wins. One watcher per process.
class SignalWatcher {
 public:
  // `spec` like "TERM=exit,USR1=requeue,INT=exit": comma-separated SIGNAL=ACTION, signal names
  // with or without "SIG", any case (TERM, INT, HUP, QUIT, USR1, USR2, XCPU), actions "exit" or
  // "requeue"; an empty spec watches nothing. Throws std::invalid_argument naming the bad entry
  // and what is allowed, std::logic_error when another watcher is alive.
  explicit SignalWatcher(const std::string& spec);
  ~SignalWatcher();  // restores the previous handlers
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  StopAction pending() const;
  int last_signal() const;  // 0 when none
  // The action configured for `signo` (kNone when it is not watched).
  StopAction action_for(int signo) const;
};

// Collective: every rank passes its local action; all get the strongest (one tiny all-reduce).
StopAction agree_stop(Communicator& comm, StopAction local);

// Requeues the current Slurm job (SLURM_JOB_ID) via libslurm's slurm_requeue; Slurm then ends
// this run (TERM, then KILL after KillWait), so call it on one rank, after the checkpoint is
// durable. Returns false and sets `error` when not in a Slurm job, when built without libslurm,
// or when Slurm refuses (e.g. a job submitted with --no-requeue).
bool requeue_self(std::string* error);

// What Slurm says about the current job (SLURM_JOB_ID), asked through libslurm after a TERM:
// a TERM is either preemption (PreemptMode=REQUEUE: Slurm sets the job's preempt time; it marks
// the job COMPLETED instead of requeueing it if the batch script exits inside GraceTime, so the
// runtime requeues itself) or a user's scancel (no preempt time: save and exit, no requeue).
struct PreemptQuery {
  bool known = false;            // Slurm answered
  bool preempted = false;        // the job is being preempted
  bool requeue_allowed = false;  // the job may be requeued (not --no-requeue)
  std::string error;             // why not known
};
PreemptQuery job_is_preempted();

}  // namespace railyard
