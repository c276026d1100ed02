#pragma once
// railyard-train's configuration: every option, its default, and where values come from.
//
// Sources, strongest first: the command line, then RAILYARD_<OPTION> environment variables
// (upper case, dashes as underscores: --grad-accum -> RAILYARD_GRAD_ACCUM), then the INI-style
// file named by --config (or RAILYARD_CONFIG), then the defaults shown by --help. A value from a
// stronger source replaces the whole value of a weaker one, also for the repeatable --data.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "railyard/usage_error.hpp"  // a bad option or value: what() names it

namespace railyard {

struct TrainConfig {
  // data
  std::vector<std::string> data;  // after glob expansion, in order
  std::vector<std::string> val_data;
  // model
  int layers = 4;
  int heads = 4;
  int dim = 256;
  int seq = 256;
  int vocab = 0;  // 0: the data's vocab_size
  // A Hugging Face GPT-2 directory (or its model.safetensors) to start from; its config.json
  // sets layers, heads, dim, vocab and the position rows (a checkpoint to resume wins).
  std::string init_from;
  int positions = 0;  // position-embedding rows: n_positions of --init-from; 0: --seq
  // schedule and optimizer
  int64_t steps = 1000;
  int batch = 8;  // sequences per rank per micro-step
  int grad_accum = 1;
  double lr = 6e-4;
  double min_lr_ratio = 0.1;  // cosine decay ends at lr * min_lr_ratio
  int64_t warmup = 100;
  double weight_decay = 0.1;
  double clip = 1.0;
  uint64_t seed = 1337;
  // device
  std::string device = "auto";  // cpu | cuda | auto
  std::string precision = "bf16";
  int zero = 0;
  bool recompute = false;
  std::string reduce_dtype = "fp32";
  std::string cuda_graphs = "on";  // on | off
  int cpu_threads = 0;             // kernel threads per rank on CPU; 0: from the affinity mask
  // output
  int64_t log_every = 10;
  std::string log_json;
  int64_t val_every = 0;  // 0: validate at the end only
  int val_batches = 8;
  std::string metrics_file;
  double metrics_interval = 5.0;
  double mem_alert = 0.9;
  // checkpoints and preemption
  std::string ckpt_dir;  // empty: no checkpoints
  int64_t ckpt_every = 0;
  double ckpt_interval = 0;
  int keep = 3;
  std::string resume = "auto";  // auto | never | PATH
  double save_budget = 60;
  std::string signals = "TERM=exit,USR1=requeue";
  bool requeue = true;

  bool help = false;  // --help was given; nothing else is validated

  // Every field as one JSON object (stored in checkpoints, logged at start).
  std::string to_json() const;
};

// Parses argv, the environment and the config file, expands --data globs and validates every
// value. Throws UsageError.
TrainConfig parse_train_config(int argc, const char* const argv[]);

// The names of every option, without dashes ("grad-accum"); RAILYARD_GRAD_ACCUM is the
// environment variable of "grad-accum", other RAILYARD_* variables are not options.
std::vector<std::string> train_option_names();

// What a valid configuration probably did not mean, one line each (railyard-train prints them
// as warnings): a --warmup as long as the run, and RAILYARD_* variables in `env` (an environ-style
// array) that are no option but nearly spell one (RAILYARD_STESP -> RAILYARD_STEPS), which
// would otherwise be ignored in silence.
std::vector<std::string> train_config_warnings(const TrainConfig& config, const char* const* env);

// The --help text: usage, every option with its default, the sources and their precedence.
std::string train_config_help();

}  // namespace railyard
