#include "railyard/train_config.hpp"

#include "railyard/hf_directory.hpp"

#include <glob.h>

#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "railyard/input_file.hpp"

namespace railyard {
namespace po = boost::program_options;

namespace {

constexpr unsigned kHelpWidth = 100;
constexpr uint64_t kMaxConfigBytes = 1 << 20;  // documented in docs/training.md

// One table of every option, bound to the fields of `c` (clang-format would scatter the
// chained calls).
// clang-format off
po::options_description describe(TrainConfig& c) {
  po::options_description data("Data", kHelpWidth);
  data.add_options()
      ("data", po::value(&c.data)->multitoken()->value_name("PATH"),
       "training tokens: HDF5 (/tokens + vocab_size), llm.c .bin or .npy; repeatable, globs "
       "allowed (required)")
      ("val-data", po::value(&c.val_data)->multitoken()->value_name("PATH"), "validation tokens, same formats");
  po::options_description model("Model", kHelpWidth);
  model.add_options()
      ("layers", po::value(&c.layers)->default_value(c.layers), "transformer blocks")
      ("heads", po::value(&c.heads)->default_value(c.heads), "attention heads; must divide --dim")
      ("dim", po::value(&c.dim)->default_value(c.dim), "embedding width")
      ("seq", po::value(&c.seq)->default_value(c.seq), "sequence length T")
      ("vocab", po::value(&c.vocab)->default_value(c.vocab),
       "vocabulary size; 0 = the data's vocab_size")
      ("init-from", po::value(&c.init_from)->value_name("PATH"),
       "start from a Hugging Face GPT-2 directory (config.json + model.safetensors) or its "
       ".safetensors file; its config sets the shape. A checkpoint found by --resume wins");
  po::options_description train("Training", kHelpWidth);
  train.add_options()
      ("steps", po::value(&c.steps)->default_value(c.steps), "optimizer steps in total")
      ("batch", po::value(&c.batch)->default_value(c.batch), "sequences per rank per micro-step")
      ("grad-accum", po::value(&c.grad_accum)->default_value(c.grad_accum),
       "micro-steps per optimizer step")
      ("lr", po::value(&c.lr)->default_value(c.lr, "0.0006"), "peak learning rate")
      ("min-lr-ratio", po::value(&c.min_lr_ratio)->default_value(c.min_lr_ratio, "0.1"),
       "final learning rate as a fraction of --lr (cosine decay), in [0, 1]")
      ("warmup", po::value(&c.warmup)->default_value(c.warmup), "linear warmup steps")
      ("weight-decay", po::value(&c.weight_decay)->default_value(c.weight_decay, "0.1"),
       "AdamW decoupled weight decay (matrices and embeddings only)")
      ("clip", po::value(&c.clip)->default_value(c.clip, "1"),
       "global gradient-norm clip; 0 disables")
      ("seed", po::value(&c.seed)->default_value(c.seed), "initialisation and data order");
  po::options_description device("Device", kHelpWidth);
  device.add_options()
      ("device", po::value(&c.device)->default_value(c.device), "cpu | cuda | auto")
      ("precision", po::value(&c.precision)->default_value(c.precision),
       "bf16 | fp32 (CUDA; the CPU computes in fp32)")
      ("zero", po::value(&c.zero)->default_value(c.zero), "0 | 1: shard optimizer state (CUDA)")
      ("recompute", po::bool_switch(&c.recompute), "recompute activations in backward (CUDA)")
      ("reduce-dtype", po::value(&c.reduce_dtype)->default_value(c.reduce_dtype),
       "bf16 | fp32: gradient all-reduce type (CUDA)")
      ("cuda-graphs", po::value(&c.cuda_graphs)->default_value(c.cuda_graphs),
       "on | off: launch forward and backward as CUDA graphs (CUDA)")
      ("cpu-threads", po::value(&c.cpu_threads)->default_value(c.cpu_threads),
       "threads per rank (CPU; the speed, not the bits); 0 = this rank's CPUs, shared by the ranks of a node "
       "when they are not bound");
  po::options_description output("Output", kHelpWidth);
  output.add_options()
      ("log-every", po::value(&c.log_every)->default_value(c.log_every),
       "progress line every N steps (rank 0); 0 = none")
      ("log-json", po::value(&c.log_json)->value_name("PATH"), "append one JSON object per step and event to PATH")
      ("val-every", po::value(&c.val_every)->default_value(c.val_every),
       "validation loss every N steps (with --val-data); 0 = at the end only")
      ("val-batches", po::value(&c.val_batches)->default_value(c.val_batches),
       "micro-batches per validation")
      ("metrics-file", po::value(&c.metrics_file)->value_name("PATH"),
       "Prometheus textfile (*.prom) to keep current; empty = off")
      ("metrics-interval", po::value(&c.metrics_interval)->default_value(c.metrics_interval, "5"),
       "seconds between metrics-file rewrites")
      ("mem-alert", po::value(&c.mem_alert)->default_value(c.mem_alert, "0.9"),
       "warn when device memory use exceeds this fraction, in (0, 1]");
  po::options_description ckpt("Checkpoints and preemption", kHelpWidth);
  ckpt.add_options()
      ("ckpt-dir", po::value(&c.ckpt_dir)->value_name("DIR"), "checkpoint directory; empty = no checkpoints")
      ("ckpt-every", po::value(&c.ckpt_every)->default_value(c.ckpt_every),
       "background save every N steps; 0 = off")
      ("ckpt-interval", po::value(&c.ckpt_interval)->default_value(c.ckpt_interval, "0"),
       "background save every S seconds; 0 = off")
      ("keep", po::value(&c.keep)->default_value(c.keep), "checkpoints to keep (newest)")
      ("resume", po::value(&c.resume)->default_value(c.resume),
       "auto (newest valid checkpoint in --ckpt-dir) | never | PATH of one checkpoint")
      ("save-budget", po::value(&c.save_budget)->default_value(c.save_budget, "60"),
       "seconds a save on a signal may take (the grace time); warn at start if it cannot")
      ("signals", po::value(&c.signals)->default_value(c.signals),
       "SIGNAL=exit|requeue,...: which signals stop the run and how")
      ("requeue", po::value<std::string>()->default_value("on"),
       "on | off: requeue the Slurm job ourselves on a 'requeue' signal");
  po::options_description general("General", kHelpWidth);
  general.add_options()
      ("help,h", "show this help and exit")
      ("config", po::value<std::string>()->value_name("FILE"), "INI-style file of option = value lines");

  po::options_description all;
  all.add(data).add(model).add(train).add(device).add(output).add(ckpt).add(general);
  return all;
}
// clang-format on

void require(bool ok, const std::string& option, const std::string& allowed,
             const std::string& got) {
  if (!ok) throw UsageError("--" + option + " must be " + allowed + " (got " + got + ")");
}

template <typename T>
void positive(T v, const char* option) {
  require(v > 0, option, "a positive number", std::to_string(v));
}

template <typename T>
void non_negative(T v, const char* option) {
  require(v >= 0, option, "zero or positive", std::to_string(v));
}

void one_of(const std::string& v, const char* option, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return;
    list += (list.empty() ? "" : " | ") + std::string(a);
  }
  require(false, option, "one of " + list, "'" + v + "'");
}

std::vector<std::string> expand(const std::vector<std::string>& patterns, const char* option) {
  std::vector<std::string> out;
  for (const std::string& p : patterns) {
    if (p.find_first_of("*?[") == std::string::npos) {
      std::error_code ec;
      if (!std::filesystem::exists(p, ec)) {
        throw UsageError(std::string("--") + option + ": '" + p + "' does not exist");
      }
      out.push_back(p);
      continue;
    }
    glob_t g{};
    int rc = glob(p.c_str(), 0, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);  // sorted by glob
    }
    globfree(&g);
    if (rc != 0) throw UsageError(std::string("--") + option + ": no file matches '" + p + "'");
  }
  return out;
}

// --init-from: the model's shape is the directory's; an option given that says otherwise is
// an error naming both values.
void apply_init_from(TrainConfig& c, const po::variables_map& vm) {
  std::error_code ec;
  if (!std::filesystem::exists(c.init_from, ec)) {
    throw UsageError("--init-from: '" + c.init_from +
                     "' does not exist (a Hugging Face GPT-2 directory or its model.safetensors)");
  }
  HfGpt2Config h;
  try {
    h = read_hf_config(c.init_from);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--init-from: ") + e.what());
  }
  const std::string src = hf_paths(c.init_from).config;
  auto take = [&](const char* option, int& value, int hf, const char* field) {
    if (!vm[option].defaulted() && value != hf) {
      throw UsageError("--" + std::string(option) + " " + std::to_string(value) + " contradicts " +
                       field + " " + std::to_string(hf) + " in " + src + " (leave --" + option +
                       " out: --init-from sets the model's shape)");
    }
    value = hf;
  };
  take("layers", c.layers, h.n_layer, "n_layer");
  take("heads", c.heads, h.n_head, "n_head");
  take("dim", c.dim, h.n_embd, "n_embd");
  take("vocab", c.vocab, h.vocab_size, "vocab_size");
  if (c.seq > h.n_positions) {
    if (!vm["seq"].defaulted()) {
      throw UsageError("--seq " + std::to_string(c.seq) + " exceeds n_positions " +
                       std::to_string(h.n_positions) + " in " + src);
    }
    c.seq = h.n_positions;
  }
  c.positions = h.n_positions;
}

// Each option's own range, one at a time.
void validate_ranges(const TrainConfig& c) {
  positive(c.layers, "layers");
  positive(c.heads, "heads");
  positive(c.dim, "dim");
  require(c.dim % c.heads == 0, "heads", "a divisor of --dim (" + std::to_string(c.dim) + ")",
          std::to_string(c.heads));
  positive(c.seq, "seq");
  non_negative(c.vocab, "vocab");
  positive(c.steps, "steps");
  positive(c.batch, "batch");
  positive(c.grad_accum, "grad-accum");
  require(c.lr > 0, "lr", "positive", std::to_string(c.lr));
  require(c.min_lr_ratio >= 0 && c.min_lr_ratio <= 1, "min-lr-ratio", "in [0, 1]",
          std::to_string(c.min_lr_ratio));
  non_negative(c.warmup, "warmup");
  non_negative(c.weight_decay, "weight-decay");
  non_negative(c.clip, "clip");
  one_of(c.device, "device", {"cpu", "cuda", "auto"});
  one_of(c.precision, "precision", {"bf16", "fp32"});
  require(c.zero == 0 || c.zero == 1, "zero", "0 or 1", std::to_string(c.zero));
  one_of(c.reduce_dtype, "reduce-dtype", {"bf16", "fp32"});
  one_of(c.cuda_graphs, "cuda-graphs", {"on", "off"});
  non_negative(c.cpu_threads, "cpu-threads");
  non_negative(c.log_every, "log-every");
  non_negative(c.val_every, "val-every");
  positive(c.val_batches, "val-batches");
  require(c.metrics_interval > 0, "metrics-interval", "positive",
          std::to_string(c.metrics_interval));
  require(c.mem_alert > 0 && c.mem_alert <= 1, "mem-alert", "in (0, 1]",
          std::to_string(c.mem_alert));
  non_negative(c.ckpt_every, "ckpt-every");
  non_negative(c.ckpt_interval, "ckpt-interval");
  positive(c.keep, "keep");
  require(!c.resume.empty(), "resume", "auto | never | PATH", "''");
  require(c.save_budget > 0, "save-budget", "positive", std::to_string(c.save_budget));
}

// The CPU engine computes in fp32 and has none of the GPU memory options; bf16 is only the
// default for GPUs, so an explicit request is an error, the default is not.
void validate_cpu_options(TrainConfig& c, const po::variables_map& vm) {
  if (c.device != "cpu") return;
  if (!vm["precision"].defaulted() && c.precision != "fp32") {
    throw UsageError("--precision " + c.precision +
                     " needs --device cuda (the CPU computes in fp32)");
  }
  c.precision = "fp32";
  if (c.zero != 0) throw UsageError("--zero 1 needs --device cuda");
  if (c.recompute) throw UsageError("--recompute needs --device cuda");
  if (c.reduce_dtype != "fp32") throw UsageError("--reduce-dtype bf16 needs --device cuda");
}

void validate_checkpointing(const TrainConfig& c) {
  if (c.ckpt_dir.empty() && (c.ckpt_every > 0 || c.ckpt_interval > 0)) {
    throw UsageError("--ckpt-every / --ckpt-interval need --ckpt-dir");
  }
  if (c.resume != "auto" && c.resume != "never") {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(c.resume, ec)) {
      throw UsageError("--resume must be auto | never | PATH of a checkpoint file (got '" +
                       c.resume + "', which is no file)");
    }
  }
}

void validate(TrainConfig& c, const po::variables_map& vm) {
  if (c.data.empty()) throw UsageError("--data is required: the training token file(s)");
  c.data = expand(c.data, "data");
  c.val_data = expand(c.val_data, "val-data");
  if (!c.init_from.empty()) apply_init_from(c, vm);
  validate_ranges(c);
  const std::string rq = vm["requeue"].as<std::string>();
  one_of(rq, "requeue", {"on", "off"});
  c.requeue = rq == "on";
  validate_cpu_options(c, vm);
  validate_checkpointing(c);
}

}  // namespace

TrainConfig parse_train_config(int argc, const char* const argv[]) {
  TrainConfig c;
  po::options_description desc = describe(c);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    if (vm.count("help")) {
      c.help = true;
      return c;
    }
    po::store(po::parse_environment(desc,
                                    [&desc](const std::string& var) -> std::string {
                                      const std::string prefix = "RAILYARD_";
                                      if (var.rfind(prefix, 0) != 0) return "";
                                      std::string name = var.substr(prefix.size());
                                      for (char& ch : name) {
                                        ch = ch == '_' ? '-' : static_cast<char>(std::tolower(ch));
                                      }
                                      // Other RAILYARD_* variables (the plugin's) are not ours.
                                      if (name == "help") return "";
                                      return desc.find_nothrow(name, false) ? name : "";
                                    }),
              vm);
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      // A config is a few lines; a directory, /dev/zero or a huge file is a mistake.
      const std::string problem = input_file_problem(path, kMaxConfigBytes);
      if (!problem.empty()) throw UsageError("--config '" + path + "' " + problem);
      std::ifstream in(path);
      if (!in) throw UsageError("--config: cannot read '" + path + "'");
      try {
        po::store(po::parse_config_file(in, desc), vm);
      } catch (const po::error& e) {
        throw UsageError("--config '" + path + "': " + e.what());
      }
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + " (see --help)");
  }
  validate(c, vm);
  return c;
}

std::vector<std::string> train_option_names() {
  TrainConfig c;
  std::vector<std::string> names;
  const po::options_description desc = describe(c);
  for (const auto& o : desc.options()) names.push_back(o->long_name());
  return names;
}

std::string train_config_help() {
  TrainConfig c;
  std::ostringstream s;
  s << "Usage: railyard-train --data FILE... [options]\n"
       "Trains a GPT data-parallel, one rank per GPU (or CPU process), launched by\n"
       "srun --mpi=pmix, mpirun, or alone.\n\n"
       "Values come from, strongest first: the command line, RAILYARD_<OPTION> environment\n"
       "variables (e.g. RAILYARD_GRAD_ACCUM=4), the --config file (lines 'grad-accum = 4'),\n"
       "then the defaults below.\n"
       "Exit status: 0 done, 1 failure, 2 bad option or input, 3 saved and stopped on a signal,\n"
       "4 saved, requeued and stopped.\n";
  s << describe(c);
  return s.str();
}

std::string TrainConfig::to_json() const {
  nlohmann::json j = {
      {"data", data},
      {"val_data", val_data},
      {"layers", layers},
      {"heads", heads},
      {"dim", dim},
      {"seq", seq},
      {"vocab", vocab},
      {"init_from", init_from},
      {"positions", positions},
      {"steps", steps},
      {"batch", batch},
      {"grad_accum", grad_accum},
      {"lr", lr},
      {"min_lr_ratio", min_lr_ratio},
      {"warmup", warmup},
      {"weight_decay", weight_decay},
      {"clip", clip},
      {"seed", seed},
      {"device", device},
      {"precision", precision},
      {"zero", zero},
      {"recompute", recompute},
      {"reduce_dtype", reduce_dtype},
      {"cuda_graphs", cuda_graphs},
      {"cpu_threads", cpu_threads},
      {"log_every", log_every},
      {"log_json", log_json},
      {"val_every", val_every},
      {"val_batches", val_batches},
      {"metrics_file", metrics_file},
      {"metrics_interval", metrics_interval},
      {"mem_alert", mem_alert},
      {"ckpt_dir", ckpt_dir},
      {"ckpt_every", ckpt_every},
      {"ckpt_interval", ckpt_interval},
      {"keep", keep},
      {"resume", resume},
      {"save_budget", save_budget},
      {"signals", signals},
      {"requeue", requeue},
  };
  return j.dump();
}

}  // namespace railyard
