// railyard-ckpt: list, verify, inspect and export railyard checkpoints (docs/checkpoint-format.md).
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ckpt_commands.hpp"
#include "railyard/checkpoint.hpp"
#include "railyard/exit_code.hpp"
#include "railyard/gpt_checkpoint.hpp"
#include "railyard/hf_directory.hpp"
#include "railyard/input_file.hpp"
#include "railyard/iso_time.hpp"
#include "railyard/safetensors_export.hpp"

namespace po = boost::program_options;

namespace {

using railyard::exit_code::kOk;
using railyard::exit_code::kUsage;
constexpr int kInvalid = railyard::exit_code::kFailure;  // does not verify, or export failed

const char* kUsageText =
    "usage: railyard-ckpt list DIR\n"
    "       railyard-ckpt verify FILE\n"
    "       railyard-ckpt inspect FILE\n"
    "       railyard-ckpt export FILE --format safetensors -o OUT [--force]\n"
    "       railyard-ckpt export FILE --format hf -o DIR [--force]\n";
const char* kUsageDetails =
    "       railyard-ckpt {list|verify|inspect|export|sample} --help\n"
    "\n"
    "list     every checkpoint in DIR, newest first: step, time, size, valid or why not\n"
    "verify   checks format version, metadata and every dataset's XXH3-64 checksum\n"
    "inspect  prints the metadata and every tensor (shape, rms of params, m, v)\n"
    "export   safetensors: the parameters under railyard's names (safetensors / PyTorch);\n"
    "         hf: DIR/config.json + DIR/model.safetensors for transformers'\n"
    "         GPT2LMHeadModel.from_pretrained(DIR); existing files need --force\n"
    "sample   generates on the CPU from a checkpoint or HF directory: byte-level models\n"
    "         (vocab 256) print text, others token ids; same --seed, same tokens\n"
    "exit codes: 0 ok, 1 invalid checkpoint or failed export, 2 usage\n";

void print_usage(std::FILE* to) {
  std::fputs(kUsageText, to);
  std::fputs(kSampleUsage, to);
  std::fputs(kUsageDetails, to);
}

int usage(const std::string& why) {
  std::fprintf(stderr, "railyard-ckpt: %s\n", why.c_str());
  print_usage(stderr);
  return kUsage;
}

int cmd_list(const std::string& dir) {
  const auto infos = railyard::list_checkpoints(dir, railyard::gpt_checkpoint_schema());
  if (infos.empty()) {
    std::printf("no checkpoints in %s\n", dir.c_str());
    return kOk;
  }
  std::printf("%10s  %-20s  %12s  %s\n", "STEP", "TIME (UTC)", "BYTES", "STATUS");
  for (const auto& i : infos) {
    std::printf("%10lld  %-20s  %12llu  %s\n", static_cast<long long>(i.step),
                railyard::iso_time(i.mtime).c_str(), static_cast<unsigned long long>(i.bytes),
                i.valid ? "valid" : ("INVALID: " + i.error).c_str());
  }
  return kOk;
}

int cmd_verify(const std::string& path) {
  try {
    const railyard::LoadedCheckpoint c =
        railyard::read_checkpoint(path, railyard::gpt_checkpoint_schema());
    std::printf("ok: %s: step %lld, format %lld, %zu tensors verified\n", path.c_str(),
                static_cast<long long>(c.progress.step), static_cast<long long>(c.format_version),
                c.tensors.tensors.size());
    return kOk;
  } catch (const railyard::CheckpointError& e) {
    std::fprintf(stderr, "invalid: %s\n", e.what());
    return kInvalid;
  }
}

double rms(const railyard::FloatArray& v, const railyard::StoredTensor& t) {
  double s = 0;
  for (size_t i = t.offset; i < t.offset + t.numel; ++i) s += double(v[i]) * v[i];
  return std::sqrt(s / static_cast<double>(t.numel));
}

int cmd_inspect(const std::string& path) {
  railyard::LoadedCheckpoint c;
  try {
    c = railyard::read_checkpoint(path, railyard::gpt_checkpoint_schema());
  } catch (const railyard::CheckpointError& e) {
    std::fprintf(stderr, "invalid: %s\n", e.what());
    return kInvalid;
  }
  const auto& p = c.progress;
  std::printf("file            %s\n", path.c_str());
  std::printf("format_version  %lld\n", static_cast<long long>(c.format_version));
  std::printf("step            %lld\n", static_cast<long long>(p.step));
  std::printf("tokens_seen     %lld\n", static_cast<long long>(p.tokens_seen));
  std::printf("lr              %.9g\n", p.lr);
  std::printf("adam_step       %lld\n", static_cast<long long>(c.state.adam_step));
  std::printf("world_size      %d\n", p.world_size);
  std::printf("loader          seed=%llu epoch=%llu cursor=%llu\n",
              static_cast<unsigned long long>(p.loader.seed),
              static_cast<unsigned long long>(p.loader.epoch),
              static_cast<unsigned long long>(p.loader.cursor));
  std::printf("created         %s\n", railyard::iso_time(c.created_unix).c_str());
  std::string model;
  for (const railyard::Attribute& a : c.model) {
    model += (model.empty() ? "" : " ") + a.name + "=" + railyard::attribute_text(a.value);
  }
  std::printf("model           %s\n", model.c_str());
  std::printf("rng_state       %zu words\n", p.rng_state.size());
  std::printf("config_json     %s\n", p.config_json.c_str());
  const std::vector<railyard::StoredTensor>& tensors = c.tensors.tensors;
  size_t n = 0;
  for (const auto& t : tensors) n += t.numel;
  std::printf("tensors         %zu (%zu parameters); rms of params, adam m, adam v:\n",
              tensors.size(), n);
  for (const auto& t : tensors) {
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      shape += (i ? ", " : "") + std::to_string(t.shape[i]);
    }
    shape += "]";
    std::printf("  %-24s %-14s %.6g %.6g %.6g\n", t.name.c_str(), shape.c_str(),
                rms(c.state.params, t), rms(c.state.m, t), rms(c.state.v, t));
  }
  return kOk;
}

int cmd_export(const std::string& file, const std::string& format, const std::string& out,
               bool force) {
  if (format != "safetensors" && format != "hf") {
    return usage("export: --format '" + format + "' is not supported (allowed: safetensors, hf)");
  }
  try {
    railyard::refuse_output_over_input(out, file);
  } catch (const std::invalid_argument& e) {
    return usage(std::string("export: ") + e.what());
  }
  try {
    const railyard::LoadedCheckpoint c =
        railyard::read_checkpoint(file, railyard::gpt_checkpoint_schema());
    if (format == "hf") {
      railyard::export_hf_directory(c, out, force);
    } else {
      std::error_code ec;
      if (!force && std::filesystem::exists(std::filesystem::symlink_status(out, ec))) {
        throw std::runtime_error(out + " exists; pass --force to overwrite it");
      }
      railyard::export_safetensors(c, out);
    }
    std::printf("exported %s (step %lld) to %s\n", file.c_str(),
                static_cast<long long>(c.progress.step), out.c_str());
    return kOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "railyard-ckpt: %s\n", e.what());
    return kInvalid;
  }
}

// The options of one command (list, verify, inspect, export) and its one operand, a FILE or
// DIR; nullopt when --help was asked for (and printed).
std::optional<po::variables_map> parse(const std::string& cmd, const std::vector<std::string>& args,
                                       const char* operand) {
  po::options_description visible("railyard-ckpt " + cmd + " " + operand);
  visible.add_options()("help,h", "this help");
  if (cmd == "export") {
    visible.add_options()(
        "format", po::value<std::string>()->value_name("safetensors|hf"),
        "safetensors: the parameters under railyard's names; hf: a Hugging Face GPT-2 directory")(
        "output,o", po::value<std::string>()->value_name("OUT"),
        "the file (or directory) to write")("force", "overwrite existing files");
  }
  std::optional<po::variables_map> vm = parse_with_operand(args, visible, operand);
  if (vm && cmd == "export" && !vm->count("output")) throw po::error("missing -o OUT");
  if (vm && cmd == "export" && !vm->count("format")) throw po::error("missing --format");
  return vm;
}

// `sample`: its options parsed like the other commands', its work in ckpt_sample_command.cpp.
int run_sample(const std::vector<std::string>& args) {
  std::optional<SampleArgs> a;
  try {
    a = parse_sample_args(args);
  } catch (const po::error& e) {
    return usage(std::string("sample: ") + e.what());
  }
  return a ? ckpt_sample_command(*a) : kOk;
}

int run(const std::string& cmd, const std::vector<std::string>& args) {
  if (cmd == "sample") return run_sample(args);
  const char* operand = cmd == "list" ? "DIR" : "FILE";
  if (cmd != "list" && cmd != "verify" && cmd != "inspect" && cmd != "export") {
    return usage("unknown command '" + cmd + "'");
  }
  std::optional<po::variables_map> vm;
  try {
    vm = parse(cmd, args, operand);
  } catch (const po::error& e) {
    return usage(cmd + ": " + e.what());
  }
  if (!vm) return kOk;
  const std::string target = (*vm)["operand"].as<std::string>();
  if (cmd == "list") return cmd_list(target);
  if (cmd == "verify") return cmd_verify(target);
  if (cmd == "inspect") return cmd_inspect(target);
  return cmd_export(target, (*vm)["format"].as<std::string>(), (*vm)["output"].as<std::string>(),
                    vm->count("force") > 0);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage("missing command");
  const std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    print_usage(stdout);
    return kOk;
  }
  try {
    return run(cmd, args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "railyard-ckpt: %s\n", e.what());
    return kInvalid;
  }
}
