#pragma once
// The data-parallel training loop, the same for every Engine: per step zero_grad, --grad-accum
// micro-steps of forward/backward on this rank's part of the global batch, gradient
// all-reduce, AdamW at the scheduled learning rate, the loss averaged over ranks; validation,
// periodic background checkpoints, and the preemption protocol of preempt.hpp at every step
// boundary (agree, save synchronously, requeue where asked, exit with a documented code).
// Resume restores the engine state, the step, the tokens seen and the loader position, so the
// losses after a resume equal those of an uninterrupted run on the same number of ranks.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "railyard/engine.hpp"
#include "railyard/train_config.hpp"
#include "railyard/train_observer.hpp"

namespace railyard {

class Communicator;
class SignalWatcher;
struct LoadedCheckpoint;
enum class StopAction : int;

using EngineFactory = std::function<std::unique_ptr<Engine>(const GptConfig&, const EngineOptions&,
                                                            Communicator&, uint64_t seed)>;

// Collective: each rank passes its exit code for a phase that may fail on some ranks only
// (0 = fine) and the message of its failure. The lowest failing rank prints its message to
// stderr; every rank gets the largest code, so all ranks leave together instead of waiting for
// a failed peer in a collective.
int agree_exit_code(Communicator& comm, int code, const std::string& message);

class Trainer {
 public:
  // `watcher`: the process's signal watcher (not owned), for a caller that keeps it installed
  // beyond run() so that a signal arriving after the last step cannot kill a finished run;
  // nullptr: run() installs one from cfg.signals for its own duration.
  Trainer(TrainConfig cfg, Communicator& comm, EngineFactory make,
          SignalWatcher* watcher = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Not owned; called on the rank that registered it (railyard-train registers the logs on
  // rank 0 only).
  void add_observer(TrainObserver& observer);

  // Trains to --steps or until a stop signal; returns exit_code::kOk, kStopped or kRequeued,
  // or kUsage / kFailure when setting up failed on any rank (the message is printed).
  // Throws on a failure during training.
  int run();

  // The losses of the steps this run took (mean over ranks), in order.
  const std::vector<double>& losses() const { return losses_; }

 private:
  struct State;
  // run()'s phases, in the order it calls them.
  void launch(State& s);
  int setup(State& s);
  void setup_data(State& s);
  void setup_model(State& s);
  void setup_engine(State& s);
  std::optional<int> stop_during_startup(State& s);
  int resume(State& s);
  void refuse_old_checkpoints(State& s);
  void restore(State& s, const LoadedCheckpoint& loaded, double seconds);
  void announce(State& s);
  void check_save_budget(State& s);
  std::optional<int> stop_if_agreed(State& s);
  std::optional<int> train_step(State& s);
  bool evaluate_if_due(State& s);
  void checkpoint_if_due(State& s);
  int finish(State& s);
  // What the phases share.
  int agreed(const std::function<void()>& phase);  // runs a setup phase; agree_exit_code
  int stop_run(State& s, StopAction stop, bool saved, bool started);
  bool validate(State& s);
  bool collect_background(State& s, int64_t step);
  void report_finished_background(State& s);
  void save_sync(State& s, const std::string& reason);
  void save_async(State& s);
  void emit_run(const State& s, const std::string& kind, const std::string& detail);
  void emit_checkpoint(const CheckpointEvent& e);
  void warn(const std::string& msg) const;

  TrainConfig cfg_;
  Communicator& comm_;
  EngineFactory make_;
  SignalWatcher* watcher_;
  std::vector<TrainObserver*> observers_;
  std::vector<double> losses_;
};

}  // namespace railyard
