#include "railyard/trainer.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "railyard/checkpoint.hpp"
#include "railyard/communicator.hpp"
#include "railyard/contract_env.hpp"
#include "railyard/data_loader.hpp"
#include "railyard/divergence.hpp"
#include "railyard/gpt_checkpoint.hpp"
#include "railyard/hf_directory.hpp"
#include "railyard/lr_schedule.hpp"
#include "railyard/model_memory.hpp"
#include "railyard/preempt.hpp"
#include "railyard/resume_check.hpp"
#include "railyard/stop_requeue.hpp"
#include "railyard/token_dataset.hpp"

extern char** environ;

namespace railyard {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// This process's CPU affinity as a list like "0-3,8".
std::string cpu_list() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) ++end;
    out +=
        (out.empty() ? "" : ",") + std::to_string(c) + (end > c ? "-" + std::to_string(end) : "");
    c = end;
  }
  return out;
}

// What this rank was bound to: host, local rank, CPUs, the plugin's RAILYARD_* variables
// (not our option variables) and CUDA_VISIBLE_DEVICES.
std::string binding_line(const Communicator& comm) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  std::string line = "rank " + std::to_string(comm.rank()) + " | host " + host + " | local " +
                     std::to_string(comm.local_rank()) + "/" + std::to_string(comm.local_size()) +
                     " | cpus " + cpu_list();
  const std::vector<std::string> options = train_option_names();
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (name == "CUDA_VISIBLE_DEVICES") {
      vars.push_back(kv);
    } else if (name.starts_with(contract_env::kPrefix)) {
      std::string option = name.substr(sizeof contract_env::kPrefix - 1);
      for (char& ch : option) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(ch));
      if (std::find(options.begin(), options.end(), option) == options.end()) vars.push_back(kv);
    }
  }
  std::sort(vars.begin(), vars.end());
  for (const std::string& v : vars) line += " | " + v;
  return line;
}

std::string signal_name(int sig) {
  if (sig <= 0) return "";
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Starts the engine from a Hugging Face GPT-2 directory's weights with fresh AdamW moments.
// Every rank reads the files, so a bad file fails every rank alike.
void init_from_hf(Engine& engine, const GptConfig& model, const std::string& path) {
  ModelState st;
  try {
    st.params = read_hf_params(path, model);
  } catch (const std::exception& e) {
    throw UsageError(std::string("--init-from: ") + e.what());
  }
  st.m.assign(st.params.size(), 0.0f);
  st.v.assign(st.params.size(), 0.0f);
  st.shard_begin = 0;
  st.shard_end = st.params.size();
  engine.load_state(st);
}

}  // namespace

int agree_exit_code(Communicator& comm, int code, const std::string& message) {
  const int agreed = static_cast<int>(comm.allreduce_max(code));
  const int64_t first = comm.allreduce_min(code != 0 ? comm.rank() : INT_MAX);
  if (code != 0 && first == comm.rank()) {
    std::fprintf(stderr, "railyard-train: %s%s\n",
                 comm.size() > 1 ? ("rank " + std::to_string(comm.rank()) + ": ").c_str() : "",
                 message.c_str());
  }
  return agreed;
}

// Everything a run holds between setup and exit.
struct Trainer::State {
  std::unique_ptr<TokenDataset> train, val;
  GptConfig model;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<DataLoader> loader, val_loader;
  std::unique_ptr<SignalWatcher> own_watcher;  // when the caller gave none
  SignalWatcher* watcher = nullptr;
  std::unique_ptr<CheckpointStore> store;
  // The model as the checkpoints see it (gpt_checkpoint.hpp), built once.
  StoredTensors ckpt_tensors;
  Attributes ckpt_model;
  LrSchedule schedule;
  AdamWParams hp;
  TrainProgress progress;
  // The background save in flight: its step and the training time its snapshot took.
  std::optional<int64_t> async_step;
  double async_stall = 0;
  std::optional<int64_t> durable_step;  // the newest save this run made durable and reported
  Clock::time_point last_save = Clock::now();
  bool budget_warned = false;
  std::string newest_ckpt;   // saved or resumed from, for the divergence message
  std::string resumed_from;  // the checkpoint loaded and where it came from; empty: fresh
  // The loop's constants and its place.
  int64_t step_tokens = 0;
  float micro_scale = 1;
  int64_t first_step = 0, last_eval = -1;
  Batch batch;
};

Trainer::Trainer(TrainConfig cfg, Communicator& comm, EngineFactory make, SignalWatcher* watcher)
    : cfg_(std::move(cfg)), comm_(comm), make_(std::move(make)), watcher_(watcher) {}

Trainer::~Trainer() = default;

void Trainer::add_observer(TrainObserver& observer) {
  observers_.push_back(&observer);
}

int Trainer::run() {
  State s;
  launch(s);
  if (const int code = setup(s); code != exit_code::kOk) return code;
  if (const std::optional<int> code = stop_during_startup(s)) return *code;
  if (const int code = resume(s); code != exit_code::kOk) return code;
  announce(s);
  check_save_budget(s);
  // Checkpoint errors are collective (every rank throws the same), so all ranks can leave
  // through here without leaving one in a collective.
  try {
    while (s.progress.step < cfg_.steps) {
      if (const std::optional<int> code = stop_if_agreed(s)) return *code;
      if (const std::optional<int> code = train_step(s)) return *code;
      if (!evaluate_if_due(s)) continue;  // a signal cut it short: the step boundary handles it
      checkpoint_if_due(s);
    }
    return finish(s);
  } catch (const CheckpointError& e) {
    if (comm_.rank() == 0) std::fprintf(stderr, "railyard-train: %s\n", e.what());
    return exit_code::kFailure;
  }
}

// ---- events --------------------------------------------------------------------------------

void Trainer::emit_run(const State& s, const std::string& kind, const std::string& detail) {
  RunEvent e{kind, s.progress.step, detail};
  for (TrainObserver* o : observers_) o->on_run(e);
}

void Trainer::emit_checkpoint(const CheckpointEvent& e) {
  for (TrainObserver* o : observers_) o->on_checkpoint(e);
}

void Trainer::warn(const std::string& msg) const {
  if (comm_.rank() == 0) std::fprintf(stderr, "railyard: warning: %s\n", msg.c_str());
}

// ---- launch and setup ------------------------------------------------------------------------

// Which launcher, how many ranks, what each rank is bound to.
void Trainer::launch(State& s) {
  std::vector<std::string> bindings = comm_.gather_strings(binding_line(comm_), 0);
  emit_run(s, "launch",
           "launcher " + comm_.launcher() + " | ranks " + std::to_string(comm_.size()));
  for (const std::string& b : bindings) emit_run(s, "bind", b);
}

int Trainer::agreed(const std::function<void()>& phase) {
  int code = exit_code::kOk;
  std::string message;
  try {
    phase();
  } catch (const UsageError& e) {
    code = exit_code::kUsage, message = e.what();
  } catch (const DataError& e) {
    code = exit_code::kUsage, message = e.what();
  } catch (const std::invalid_argument& e) {
    code = exit_code::kUsage, message = e.what();
  } catch (const std::bad_alloc&) {
    code = exit_code::kFailure;
    message = "out of memory while setting up the run: lower --batch, --seq, --dim or --layers";
  } catch (const std::exception& e) {
    code = exit_code::kFailure, message = e.what();
  }
  return agree_exit_code(comm_, code, message);
}

// Every failure here is agreed on, so no rank waits for a failed peer. The engine comes on its
// own, once every rank got that far: making it is collective (NCCL, --device auto's choice).
int Trainer::setup(State& s) {
  const int code = agreed([&] {
    setup_data(s);
    setup_model(s);
  });
  if (code != exit_code::kOk) return code;
  return agreed([&] { setup_engine(s); });
}

void Trainer::setup_data(State& s) {
  // First, so that a preemption during a slow start is not fatal.
  if (watcher_ == nullptr) s.own_watcher = std::make_unique<SignalWatcher>(cfg_.signals);
  s.watcher = watcher_ != nullptr ? watcher_ : s.own_watcher.get();
  const auto t_data = Clock::now();
  s.train = std::make_unique<TokenDataset>(cfg_.data);
  const int vocab = cfg_.vocab > 0 ? cfg_.vocab : s.train->vocab();
  s.train->check_vocab(vocab);
  if (!cfg_.init_from.empty() && s.train->vocab() > vocab) {
    throw UsageError("--data declares vocab_size " + std::to_string(s.train->vocab()) +
                     ", --init-from's config.json has vocab_size " + std::to_string(vocab) +
                     ": the data was not made with the model's tokenizer");
  }
  std::string data_detail = "train " + std::to_string(s.train->size()) + " tokens in " +
                            std::to_string(s.train->files().size()) + " file(s)";
  if (!cfg_.val_data.empty()) {
    s.val = std::make_unique<TokenDataset>(cfg_.val_data);
    s.val->check_vocab(vocab);
    data_detail += " | val " + std::to_string(s.val->size()) + " tokens";
  }
  char took[64];
  std::snprintf(took, sizeof took, " | vocab %d | checked in %.2f s", vocab, since(t_data));
  emit_run(s, "data", data_detail + took);
  s.model.vocab = vocab;
}

void Trainer::setup_model(State& s) {
  const int rank = comm_.rank(), world = comm_.size();
  s.model.padded_vocab = padded_vocab_for(s.model.vocab);
  s.model.max_seq = cfg_.positions > 0 ? cfg_.positions : cfg_.seq;
  s.model.layers = cfg_.layers;
  s.model.heads = cfg_.heads;
  s.model.dim = cfg_.dim;
  s.model.validate();
  check_model_fits(s.model, cfg_.device == "cpu", cfg_.batch, cfg_.seq);
  s.schedule = LrSchedule{cfg_.lr, cfg_.warmup, cfg_.steps, cfg_.min_lr_ratio};
  s.schedule.validate();
  s.hp.weight_decay = static_cast<float>(cfg_.weight_decay);
  s.hp.clip = static_cast<float>(cfg_.clip);

  s.loader = std::make_unique<DataLoader>(*s.train, cfg_.batch, cfg_.seq, rank, world, cfg_.seed);
  if (s.val) {
    s.val_loader = std::make_unique<DataLoader>(*s.val, cfg_.batch, cfg_.seq, rank, world,
                                                cfg_.seed, /*shuffle=*/false);
  }
}

void Trainer::setup_engine(State& s) {
  EngineOptions opts;
  opts.device = cfg_.device;
  opts.precision = cfg_.precision;
  opts.zero_stage = cfg_.zero;
  opts.recompute = cfg_.recompute;
  opts.reduce_bf16 = cfg_.reduce_dtype == "bf16";
  opts.cuda_graphs = cfg_.cuda_graphs == "on";
  opts.micro_batch = cfg_.batch;
  opts.seq = cfg_.seq;
  opts.cpu_threads = cfg_.cpu_threads;
  opts.reserve_snapshot = !cfg_.ckpt_dir.empty() && (cfg_.ckpt_every > 0 || cfg_.ckpt_interval > 0);
  s.engine = make_(s.model, opts, comm_, cfg_.seed);

  s.progress.world_size = comm_.size();
  s.progress.config_json = cfg_.to_json();
  s.progress.loader = s.loader->position();
  s.ckpt_tensors = gpt_stored_tensors(s.engine->layout());
  s.ckpt_model = gpt_attributes(s.model);
  if (!cfg_.ckpt_dir.empty()) {
    s.store =
        std::make_unique<CheckpointStore>(cfg_.ckpt_dir, cfg_.keep, comm_, gpt_checkpoint_schema());
  }
}

// ---- stopping --------------------------------------------------------------------------------

// After an agreed stop: the exit code, requeueing first where asked. Requeue only with a
// durable state to continue from (`saved`), or the next run would start from step 0. Run
// events only once the run has started (a run log's marks belong to a start or resume).
int Trainer::stop_run(State& s, StopAction stop, bool saved, bool started) {
  int result = exit_code::kStopped;
  std::string job;
  if (saved && cfg_.requeue) {
    result = requeue_if_asked(
        comm_, stop, [this](const std::string& msg) { warn(msg); }, &job);
  }
  if (result == exit_code::kRequeued && started) emit_run(s, "requeue", "job " + job);
  if (started) emit_run(s, "stop", "exit code " + std::to_string(result));
  return result;
}

// A stop signal during the start-up (data checks, engine set-up): nothing is trained yet, so
// the newest checkpoint is already the state to continue from; stop before the checkpoint
// load and the write probe, which may take long.
std::optional<int> Trainer::stop_during_startup(State& s) {
  const StopAction stop = agree_stop(comm_, s.watcher->pending());
  if (stop == StopAction::kNone) return std::nullopt;
  const int sig = s.watcher->last_signal();
  if (comm_.rank() == 0) {
    std::fprintf(stderr,
                 "railyard-train: stopping on %s during start-up, before training: nothing to "
                 "save, the checkpoints are unchanged\n",
                 sig ? signal_name(sig).c_str() : stop_action_name(stop));
  }
  return stop_run(s, stop, true, false);
}

// The step boundary: all ranks agree whether to stop before anyone starts the step; on a stop
// every rank saves this step (unless the background save already holds it).
std::optional<int> Trainer::stop_if_agreed(State& s) {
  const StopAction stop = agree_stop(comm_, s.watcher->pending());
  if (stop == StopAction::kNone) return std::nullopt;
  const int sig = s.watcher->last_signal();
  emit_run(
      s, "signal",
      std::string(stop_action_name(stop)) + (sig ? " | " + signal_name(sig) + " on rank 0" : ""));
  bool saved = false;
  if (s.store) {
    saved = collect_background(s, s.progress.step);
    // Since this rank's first signal, or since the agreement when it reached another rank.
    const double first = s.watcher->first_signal_time();
    const Clock::time_point signal_at =
        first > 0 ? Clock::time_point(std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(first)))
                  : Clock::now();
    if (!saved) save_sync(s, "signal", signal_at);
    saved = true;
  } else {
    warn("stopping on a signal without --ckpt-dir: nothing is saved");
  }
  return stop_run(s, stop, saved, true);
}

// ---- resume ----------------------------------------------------------------------------------

int Trainer::resume(State& s) {
  int code = exit_code::kOk;
  std::string message;
  try {
    refuse_old_checkpoints(s);
    const auto t_load = Clock::now();
    std::optional<LoadedCheckpoint> loaded;
    if (cfg_.resume == "auto" && s.store) {
      loaded = s.store->load_latest(s.ckpt_model, [this](const std::string& why) { warn(why); });
      emit_run(s, "load",
               loaded ? loaded->path + " (the newest valid checkpoint in " + cfg_.ckpt_dir + ")"
                      : "no checkpoint in " + cfg_.ckpt_dir + " yet: a fresh start");
    } else if (cfg_.resume != "auto" && cfg_.resume != "never") {
      emit_run(s, "load", cfg_.resume);
      loaded = read_checkpoint(cfg_.resume, gpt_checkpoint_schema(), &s.ckpt_model);
    }
    if (loaded) {
      restore(s, *loaded, since(t_load));
    } else if (!cfg_.init_from.empty()) {
      init_from_hf(*s.engine, s.model, cfg_.init_from);
      char took[64];
      std::snprintf(took, sizeof took, " in %.2f s", since(t_load));
      emit_run(s, "init", "weights from " + cfg_.init_from + " (Hugging Face GPT-2)" + took);
    }
  } catch (const UsageError& e) {
    code = exit_code::kUsage, message = e.what();
  } catch (const CheckpointError& e) {
    code = exit_code::kUsage, message = e.what();
  } catch (const std::invalid_argument& e) {
    code = exit_code::kUsage, message = std::string("resume: ") + e.what();
  }
  return agree_exit_code(comm_, code, message);
}

// --resume never: our saves would mix with older ones, and a restart with --resume auto would
// load whichever is newest, perhaps one of the old run.
void Trainer::refuse_old_checkpoints(State& s) {
  if (cfg_.resume != "never" || !s.store) return;
  const std::vector<CheckpointInfo> old = s.store->list();
  if (!old.empty()) {
    throw UsageError("--resume never, but --ckpt-dir '" + cfg_.ckpt_dir +
                     "' already holds checkpoints (newest: " + old.front().path +
                     "); use an empty directory or remove them");
  }
}

void Trainer::restore(State& s, const LoadedCheckpoint& loaded, double seconds) {
  s.engine->load_state(loaded.state);
  s.loader->set_position(loaded.progress.loader);
  const int saved_world = loaded.progress.world_size;
  for (const std::string& w :
       resume_differences(cfg_, comm_.size(), loaded.progress.config_json, saved_world)) {
    warn(w);
  }
  s.progress.step = loaded.progress.step;
  s.progress.tokens_seen = loaded.progress.tokens_seen;
  s.progress.lr = loaded.progress.lr;
  s.progress.loader = loaded.progress.loader;
  s.progress.rng_state = loaded.progress.rng_state;
  char took[64];
  std::snprintf(took, sizeof took, ", loaded in %.2f s", seconds);
  s.newest_ckpt = loaded.path;
  s.resumed_from = loaded.path + " (saved on " + std::to_string(saved_world) + " rank" +
                   (saved_world == 1 ? "" : "s") + took + ")";
  if (!cfg_.init_from.empty()) {
    emit_run(s, "init",
             "--init-from " + cfg_.init_from + " not used: resuming from " + loaded.path +
                 " (a checkpoint wins)");
  }
}

// The start (or resume) line: the engine, the model and the global batch.
void Trainer::announce(State& s) {
  const GptConfig& g = s.model;
  const ParamLayout& layout = s.engine->layout();
  char detail[1024];  // the CUDA engine's description runs to about 400 characters
  std::snprintf(detail, sizeof detail,
                "engine %s | params %zu | layers %d dim %d heads %d seq %d vocab %d | "
                "global batch %d sequences x %d micro-steps x %d tokens",
                s.engine->describe().c_str(), layout.total(), g.layers, g.dim, g.heads, g.max_seq,
                g.vocab, comm_.size() * cfg_.batch, cfg_.grad_accum, cfg_.seq);
  const std::string note = s.store ? s.engine->checkpoint_note() : "";
  if (!note.empty()) {
    std::snprintf(detail + std::strlen(detail), sizeof detail - std::strlen(detail), " | %s",
                  note.c_str());
  }
  emit_run(s, s.resumed_from.empty() ? "start" : "resume",
           s.resumed_from.empty() ? detail : "from " + s.resumed_from + " | " + detail);
  s.step_tokens = static_cast<int64_t>(comm_.size()) * cfg_.batch * cfg_.grad_accum *
                  static_cast<int64_t>(cfg_.seq);
  s.micro_scale = 1.0f / static_cast<float>(cfg_.grad_accum);
  s.first_step = s.progress.step;
}

// The save budget: can a save on a signal finish within the grace time? A save streams the
// state from the device (or host) to the disk, the two overlapped, so it runs at the slower of
// the two rates, both measured now on this run's device and disk.
void Trainer::check_save_budget(State& s) {
  if (!s.store) return;
  std::shared_ptr<StateSnapshot> live = s.engine->snapshot_state(false);
  const double copy_rate = live ? measure_copy_rate(*live, kStagingBytes) : 0;
  live.reset();
  if (comm_.rank() != 0) return;
  const uint64_t state_bytes = 3 * s.engine->layout().total() * sizeof(float);
  try {
    const double disk_rate =
        measure_write_rate(cfg_.ckpt_dir, std::min<uint64_t>(state_bytes, 64u << 20));
    const std::string msg =
        save_budget_warning(state_bytes, disk_rate, copy_rate, cfg_.ckpt_dir, cfg_.save_budget);
    if (!msg.empty()) {
      warn(msg);
      s.budget_warned = true;
    }
  } catch (const std::exception& e) {
    warn(std::string("could not measure the checkpoint write rate: ") + e.what());
  }
}

// ---- the step --------------------------------------------------------------------------------

// One optimizer step over --grad-accum micro-batches; exit_code::kDiverged when the loss or
// the gradient norm is not finite on any rank (that state is not saved).
std::optional<int> Trainer::train_step(State& s) {
  const int world = comm_.size();
  const auto t0 = Clock::now();
  s.engine->zero_grad();
  double local = 0;
  for (int k = 0; k < cfg_.grad_accum; ++k) {
    s.loader->next(s.batch);
    local += s.engine->forward_backward(s.batch.inputs, s.batch.targets, cfg_.batch, cfg_.seq,
                                        s.micro_scale, k + 1 == cfg_.grad_accum);
  }
  // Asked while the device still runs the backward: after the optimizer step, the query (about
  // 0.1 ms on an H200's driver) would delay the next step's launch past the end of the update.
  const auto [mem_used, mem_total] = s.engine->device_memory();
  s.engine->reduce_gradients();
  const double lr = s.schedule.at(s.progress.step);
  const float norm = s.engine->optimizer_step(s.hp, static_cast<float>(lr));
  double loss = local / cfg_.grad_accum;
  comm_.allreduce_sum(&loss, 1);
  loss /= world;
  if (step_diverged(comm_, loss, norm)) {
    collect_background(s, -1);  // an earlier, finite step: keep it
    const std::string msg = divergence_message(s.progress.step + 1, loss, norm, s.newest_ckpt);
    if (comm_.rank() == 0) std::fprintf(stderr, "railyard-train: %s\n", msg.c_str());
    emit_run(s, "stop", "exit code " + std::to_string(exit_code::kDiverged) + " | " + msg);
    return exit_code::kDiverged;
  }

  s.progress.step += 1;
  s.progress.tokens_seen += s.step_tokens;
  s.progress.lr = lr;
  s.progress.loader = s.loader->position();
  const double secs = since(t0);
  losses_.push_back(loss);
  StepEvent ev{s.progress.step,
               cfg_.steps,
               loss,
               lr,
               norm,
               secs,
               static_cast<double>(s.step_tokens) / secs,
               s.progress.tokens_seen,
               mem_used,
               mem_total};
  for (TrainObserver* o : observers_) o->on_step(ev);
  return std::nullopt;
}

// Validation every --val-every steps; false when a stop signal cut it short.
bool Trainer::evaluate_if_due(State& s) {
  if (!s.val || cfg_.val_every <= 0 || s.progress.step % cfg_.val_every != 0) return true;
  if (!validate(s)) return false;
  s.last_eval = s.progress.step;
  return true;
}

// False when a stop signal cut it short: checked before every micro-batch, agreed by all
// ranks at the same batch, so a long validation never outlasts Slurm's grace time.
bool Trainer::validate(State& s) {
  s.val_loader->set_position(LoaderPosition{cfg_.seed, 0, 0});
  double sum = 0;
  Batch b;
  for (int i = 0; i < cfg_.val_batches; ++i) {
    if (agree_stop(comm_, s.watcher->pending()) != StopAction::kNone) return false;
    s.val_loader->next(b);
    sum += s.engine->evaluate(b.inputs, b.targets, cfg_.batch, cfg_.seq);
  }
  sum /= cfg_.val_batches;
  comm_.allreduce_sum(&sum, 1);
  EvalEvent e{s.progress.step, sum / comm_.size()};
  for (TrainObserver* o : observers_) o->on_eval(e);
  return true;
}

// ---- checkpoints -----------------------------------------------------------------------------

// The checkpoint policy after a step: report a finished background save, start a new one every
// --ckpt-every steps or --ckpt-interval seconds (the last step gets the final save instead).
void Trainer::checkpoint_if_due(State& s) {
  report_finished_background(s);
  if (!s.store || s.progress.step >= cfg_.steps) return;
  bool due = cfg_.ckpt_every > 0 && s.progress.step % cfg_.ckpt_every == 0;
  if (cfg_.ckpt_interval > 0) {
    // Rank 0's clock decides, so every rank takes part in the same collective save.
    const bool late = comm_.rank() == 0 && since(s.last_save) >= cfg_.ckpt_interval;
    due = comm_.allreduce_max(late ? 1 : 0) != 0 || due;
  }
  if (due) save_async(s);
}

// Collects (waiting for) the background save, if any; true when step `step` is durable.
bool Trainer::collect_background(State& s, int64_t step) {
  if (!s.store || !s.async_step) return s.durable_step == step;
  bool saved = false;
  try {
    std::optional<SaveResult> r = s.store->wait();
    if (r) {
      s.newest_ckpt = r->path;
      emit_checkpoint(CheckpointEvent{*s.async_step, r->path, r->bytes, r->seconds, s.async_stall,
                                      true, "periodic"});
      saved = true;
    }
  } catch (const std::exception& e) {
    warn(std::string("background checkpoint of step ") + std::to_string(*s.async_step) +
         " failed: " + e.what() + "; training continues, older checkpoints are kept");
  }
  // Only the writing rank knows the outcome; all ranks must decide alike.
  if (comm_.allreduce_max(saved ? 1 : 0) != 0) s.durable_step = *s.async_step;
  s.async_step.reset();
  return s.durable_step == step;
}

// A background save is reported once durable, at the first step boundary after that, so the
// metrics' checkpoint step and age are never an interval behind.
void Trainer::report_finished_background(State& s) {
  if (s.async_step && s.store->background_finished()) collect_background(s, -1);
}

void Trainer::save_sync(State& s, const std::string& reason,
                        std::optional<Clock::time_point> signal_at) {
  SaveResult r;
  if (std::shared_ptr<StateSnapshot> live = s.engine->snapshot_state(false)) {
    r = s.store->save(s.ckpt_tensors, s.ckpt_model, *live, s.progress);
  } else {
    ModelState st = s.store->take_spare().value_or(ModelState{});  // see save_async
    s.engine->save_state(st);
    r = s.store->save(s.ckpt_tensors, s.ckpt_model, st, s.progress);
  }
  s.newest_ckpt = r.path;
  s.last_save = Clock::now();
  s.durable_step = s.progress.step;
  CheckpointEvent e{s.progress.step, r.path, r.bytes, r.seconds, r.seconds, false, reason};
  if (signal_at) e.signal_to_durable_seconds = since(*signal_at);
  emit_checkpoint(e);
  if (r.seconds > cfg_.save_budget && !s.budget_warned) {
    warn("the " + reason + " checkpoint took " + std::to_string(r.seconds) +
         " s, more than --save-budget " + std::to_string(cfg_.save_budget) + " s");
    s.budget_warned = true;
  }
}

void Trainer::save_async(State& s) {
  collect_background(s, -1);
  auto t0 = Clock::now();
  try {
    if (std::shared_ptr<StateSnapshot> snap = s.engine->snapshot_state(true)) {
      s.store->save_async(s.ckpt_tensors, s.ckpt_model, std::move(snap), s.progress);
    } else {
      // The previous snapshot's buffers, so the stall is a copy, not fresh pages faulted in.
      ModelState st = s.store->take_spare().value_or(ModelState{});
      s.engine->save_state(st);
      s.store->save_async(s.ckpt_tensors, s.ckpt_model, std::move(st), s.progress);
    }
  } catch (const CheckpointError& e) {  // collective: every rank gets it
    warn(std::string(e.what()) + "; training continues, older checkpoints are kept");
    return;
  }
  s.async_stall = since(t0);
  s.async_step = s.progress.step;
  s.last_save = Clock::now();
}

// ---- the end ---------------------------------------------------------------------------------

int Trainer::finish(State& s) {
  collect_background(s, -1);
  // A signal during this validation skips it; the final save still runs.
  if (s.val && s.last_eval != s.progress.step) validate(s);
  if (s.store && s.progress.step > s.first_step) save_sync(s, "final", std::nullopt);
  emit_run(s, "finish", "tokens " + std::to_string(s.progress.tokens_seen));
  return exit_code::kOk;
}

}  // namespace railyard
