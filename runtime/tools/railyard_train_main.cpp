// railyard-train: parse the configuration, run the Trainer, exit with a documented code
// (preempt.hpp exit_code; docs/training.md).
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/engine.hpp"
#include "railyard/json_log.hpp"
#include "railyard/launcher.hpp"
#include "railyard/memory_watch.hpp"
#include "railyard/metrics_observer.hpp"
#include "railyard/preempt.hpp"
#include "railyard/progress_log.hpp"
#include "railyard/train_config.hpp"
#include "railyard/trainer.hpp"

namespace {

using namespace railyard;

// Parses the command line and prepares what must exist before MPI starts: the help, the
// configuration's warnings and the signal watcher. An exit code where the process ends here.
std::optional<int> prepare(int argc, char** argv, TrainConfig& cfg, SignalWatcher*& watcher) {
  try {
    cfg = parse_train_config(argc, argv);
  } catch (const UsageError& e) {
    // Before MPI starts: every rank finds the same error, one prints it.
    if (launcher_rank() == 0) std::fprintf(stderr, "railyard-train: %s\n", e.what());
    return exit_code::kUsage;
  }
  if (cfg.help) {
    std::fputs(train_config_help().c_str(), stdout);
    return exit_code::kOk;
  }
  if (launcher_rank() == 0) {
    for (const std::string& w : train_config_warnings(cfg, environ)) {
      std::fprintf(stderr, "railyard: warning: %s\n", w.c_str());
    }
  }
  // Installed before MPI starts and until the process ends, deliberately never destroyed: a
  // signal that arrives while MPI starts, after the last step, or in MPI_Finalize at exit must
  // meet the flag-only handler, not the default action that would kill the run.
  try {
    watcher = new SignalWatcher(cfg.signals);
  } catch (const std::invalid_argument& e) {
    if (launcher_rank() == 0) std::fprintf(stderr, "railyard-train: --signals: %s\n", e.what());
    return exit_code::kUsage;
  }
  if (const std::string why = missing_pmi_message(); !why.empty()) {
    if (launcher_rank() == 0) std::fprintf(stderr, "railyard-train: %s\n", why.c_str());
    return exit_code::kUsage;
  }
  return std::nullopt;
}

// The run's observers: the progress and JSON logs on rank 0, the metrics file or the memory
// watch on every rank.
std::vector<std::unique_ptr<TrainObserver>> make_observers(const TrainConfig& cfg,
                                                           const Communicator& comm) {
  std::vector<std::unique_ptr<TrainObserver>> observers;
  if (comm.rank() == 0) {
    observers.push_back(std::make_unique<ProgressLog>(stdout, cfg.log_every));
    if (!cfg.log_json.empty()) observers.push_back(std::make_unique<JsonLog>(cfg.log_json));
  }
  // --recompute is advice only where the engine takes it (CUDA) and it is not on yet.
  const bool recompute_possible = cfg.device != "cpu" && !cfg.recompute;
  if (!cfg.metrics_file.empty()) {
    MetricsOptions metrics{cfg.metrics_file, cfg.metrics_interval, cfg.mem_alert, comm.rank(),
                           comm.size()};
    metrics.recompute_possible = recompute_possible;
    observers.push_back(std::make_unique<MetricsObserver>(metrics));
  } else {
    observers.push_back(std::make_unique<MemoryWatch>(cfg.mem_alert, recompute_possible));
  }
  return observers;
}

}  // namespace

int main(int argc, char** argv) {
  TrainConfig cfg;
  static SignalWatcher* watcher = nullptr;
  if (const std::optional<int> code = prepare(argc, argv, cfg, watcher)) return *code;
  Communicator* comm = nullptr;
  try {
    init_checkpoint_io_before_mpi();
    comm = &Communicator::world();
    std::vector<std::unique_ptr<TrainObserver>> observers;
    int code = exit_code::kOk;
    std::string message;
    try {
      observers = make_observers(cfg, *comm);
    } catch (const std::exception& e) {
      code = exit_code::kUsage, message = e.what();
    }
    code = agree_exit_code(*comm, code, message);
    if (code != exit_code::kOk) return code;
    Trainer trainer(cfg, *comm, make_engine, watcher);
    for (auto& o : observers) trainer.add_observer(*o);
    return trainer.run();
  } catch (const std::exception& e) {
    std::fprintf(
        stderr, "railyard-train: %serror: %s\n",
        comm && comm->size() > 1 ? ("rank " + std::to_string(comm->rank()) + ": ").c_str() : "",
        e.what());
    // The other ranks may be waiting in a collective for this one: end them all.
    if (comm != nullptr && comm->size() > 1) comm->abort(exit_code::kFailure);
    return exit_code::kFailure;
  }
}
