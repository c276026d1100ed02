// railyard-ckpt sample: text (or token ids) generated on the CPU from a checkpoint or a
// Hugging Face GPT-2 directory; optionally the prompt's logits as .npy for comparisons.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ckpt_commands.hpp"
#include "railyard/checkpoint.hpp"
#include "railyard/cpu_parallel.hpp"
#include "railyard/exit_code.hpp"
#include "railyard/gpt_checkpoint.hpp"
#include "railyard/gpt_cpu.hpp"
#include "railyard/hf_directory.hpp"
#include "railyard/npy_array.hpp"
#include "railyard/sampler.hpp"

namespace po = boost::program_options;

const char* const kSampleUsage =
    "       railyard-ckpt sample MODEL (--prompt TEXT | --prompt-ids ID,ID,...) [--tokens N]\n"
    "                     [--temperature T] [--top-k K] [--seed S] [--dump-logits OUT.npy]\n"
    "                     [--force]\n";

namespace {

// Byte-level models (railyard-data text) have exactly the 256 byte values as vocabulary.
constexpr int kByteVocab = 256;
constexpr int kGpt2Vocab = 50257;

// The whole of `text` as a T (an integer type or double), else an error naming the option.
template <typename T>
T number(const std::string& option, const std::string& text) {
  try {
    size_t used = 0;
    if constexpr (std::is_floating_point_v<T>) {
      const double v = std::stod(text, &used);
      if (used == text.size() && std::isfinite(v)) return v;
    } else if constexpr (std::is_unsigned_v<T>) {
      const unsigned long long v = std::stoull(text, &used);
      if (used == text.size() && text[0] != '-' && v <= std::numeric_limits<T>::max()) {
        return static_cast<T>(v);
      }
    } else {
      const long long v = std::stoll(text, &used);
      if (used == text.size() && v >= std::numeric_limits<T>::min() &&
          v <= std::numeric_limits<T>::max()) {
        return static_cast<T>(v);
      }
    }
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(option + " needs a number (got '" + text + "')");
}

// The whole of option `name`'s value as a T when it was given, else `fallback`; a value that is
// not a whole T is a usage error.
template <typename T>
T option_number(const po::variables_map& vm, const std::string& name, T fallback) {
  if (!vm.count(name)) return fallback;
  try {
    return number<T>("--" + name, vm[name].as<std::string>());
  } catch (const std::invalid_argument& e) {
    throw po::error(e.what());
  }
}

// The options every sample takes, shown by `railyard-ckpt sample --help`, with the defaults of
// railyard::SampleOptions (clang-format would scatter the chained calls).
po::options_description sample_options() {
  const railyard::SampleOptions d;
  char temperature[32];
  std::snprintf(temperature, sizeof temperature, "%g", d.temperature);
  const std::string tokens = "new tokens to generate (default " + std::to_string(d.tokens) + ")";
  const std::string greedy = std::string("<= 0: greedy (default ") + temperature + ")";
  const std::string top_k =
      "draw among the K most likely tokens; 0: off (default " + std::to_string(d.top_k) + ")";
  const std::string seed = "same seed, same tokens (default " + std::to_string(d.seed) + ")";
  po::options_description o("railyard-ckpt sample MODEL (a checkpoint or HF directory)");
  // clang-format off
  o.add_options()
      ("help,h", "this help")
      ("prompt", po::value<std::string>()->value_name("TEXT"),
       "the prompt's bytes (byte-level models, vocab 256)")
      ("prompt-ids", po::value<std::string>()->value_name("ID,ID,..."),
       "the prompt's token ids; exactly one of --prompt and --prompt-ids")
      ("tokens", po::value<std::string>()->value_name("N"), tokens.c_str())
      ("temperature", po::value<std::string>()->value_name("T"), greedy.c_str())
      ("top-k", po::value<std::string>()->value_name("K"), top_k.c_str())
      ("seed", po::value<std::string>()->value_name("S"), seed.c_str())
      ("dump-logits", po::value<std::string>()->value_name("OUT.npy"),
       "also write the prompt's logits as float32 [T, vocab]")
      ("force", "overwrite an existing --dump-logits file");
  // clang-format on
  return o;
}

}  // namespace

std::optional<SampleArgs> parse_sample_args(const std::vector<std::string>& args) {
  const std::optional<po::variables_map> parsed =
      parse_with_operand(args, sample_options(), "MODEL (a checkpoint or HF directory)");
  if (!parsed) return std::nullopt;
  const po::variables_map& vm = *parsed;
  SampleArgs a;
  a.model = vm["operand"].as<std::string>();
  a.have_prompt = vm.count("prompt") > 0;
  if (a.have_prompt) a.prompt = vm["prompt"].as<std::string>();
  if (vm.count("prompt-ids")) a.prompt_ids = vm["prompt-ids"].as<std::string>();
  if (vm.count("dump-logits")) a.dump = vm["dump-logits"].as<std::string>();
  a.force = vm.count("force") > 0;
  a.opts.tokens = option_number(vm, "tokens", a.opts.tokens);
  a.opts.temperature = option_number(vm, "temperature", a.opts.temperature);
  a.opts.top_k = option_number(vm, "top-k", a.opts.top_k);
  a.opts.seed = option_number(vm, "seed", a.opts.seed);
  if (a.have_prompt == !a.prompt_ids.empty()) {
    throw po::error("needs exactly one of --prompt TEXT and --prompt-ids");
  }
  if (a.opts.top_k < 0) throw po::error("--top-k must be 0 (off) or positive");
  if (a.opts.tokens < 0) throw po::error("--tokens must be 0 or positive");
  return a;
}

namespace {

std::vector<int32_t> prompt_tokens(const SampleArgs& a, int vocab) {
  std::vector<int32_t> out;
  if (a.have_prompt) {
    if (vocab != kByteVocab) {
      throw std::invalid_argument(
          "--prompt TEXT needs a byte-level model (vocab 256); this one has vocab " +
          std::to_string(vocab) +
          ": pass token ids with --prompt-ids (GPT-2: python3 -c \"import tiktoken; "
          "print(*tiktoken.get_encoding('gpt2').encode('TEXT'), sep=',')\")");
    }
    for (unsigned char c : a.prompt) out.push_back(c);
    return out;
  }
  std::string ids = a.prompt_ids;
  for (char& c : ids) c = c == ',' ? ' ' : c;
  std::istringstream in(ids);
  for (std::string t; in >> t;) {
    const auto id = number<int64_t>("--prompt-ids", t);
    if (id < 0 || id >= vocab) {
      throw std::invalid_argument("--prompt-ids: token " + t + " is outside the vocabulary [0, " +
                                  std::to_string(vocab) + ")");
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

// The logits of every prompt position over the real vocabulary, as a float32 [T, vocab] .npy.
void dump_logits(const SampleArgs& a, const railyard::GptConfig& cfg,
                 const railyard::FloatArray& params, const std::vector<int32_t>& prompt) {
  std::error_code ec;
  if (!a.force && std::filesystem::exists(std::filesystem::symlink_status(a.dump, ec))) {
    throw std::invalid_argument(a.dump + " exists; pass --force to overwrite it");
  }
  const auto T = static_cast<int>(prompt.size());
  if (T > cfg.max_seq) {
    throw std::invalid_argument("--dump-logits: the prompt has " + std::to_string(T) +
                                " tokens, the model at most " + std::to_string(cfg.max_seq));
  }
  railyard::GptCpu<float> model(cfg, 1, T);
  const std::span<const float> logits = model.logits(params.data(), prompt, 1, T);
  std::ofstream out(a.dump, std::ios::binary | std::ios::trunc);
  out << railyard::npy_header("<f4", {static_cast<uint64_t>(T), static_cast<uint64_t>(cfg.vocab)});
  for (int t = 0; t < T; ++t) {
    out.write(
        reinterpret_cast<const char*>(logits.data() + static_cast<size_t>(t) * cfg.padded_vocab),
        static_cast<std::streamsize>(sizeof(float) * static_cast<size_t>(cfg.vocab)));
  }
  out.close();
  if (!out) throw std::runtime_error("writing " + a.dump + " failed");
}

void print_result(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated,
                  int vocab) {
  if (vocab == kByteVocab) {
    for (int32_t t : prompt) std::putchar(t);
    for (int32_t t : generated) std::putchar(t);
    std::putchar('\n');
    return;
  }
  for (size_t i = 0; i < generated.size(); ++i) std::printf("%s%d", i ? " " : "", generated[i]);
  std::printf("\n");
  if (vocab == kGpt2Vocab) {
    std::fprintf(stderr,
                 "railyard-ckpt: token ids of the GPT-2 vocabulary; decode them with\n"
                 "  ... | python3 -c \"import sys, tiktoken; print(tiktoken.get_encoding('gpt2')"
                 ".decode([int(t) for t in sys.stdin.read().split()]))\"\n");
  } else {
    std::fprintf(stderr,
                 "railyard-ckpt: token ids of a %d-token vocabulary; decode them with "
                 "the tokenizer that made the training data\n",
                 vocab);
  }
}

}  // namespace

int ckpt_sample_command(const SampleArgs& a) {
  try {
    railyard::cpu::set_threads(railyard::cpu::affinity_cpus());
    railyard::GptConfig cfg;
    railyard::FloatArray params;
    std::error_code ec;
    if (std::filesystem::is_directory(a.model, ec) || a.model.ends_with(".safetensors")) {
      cfg = railyard::gpt_config_from_hf(railyard::read_hf_config(a.model));
      params = railyard::read_hf_params(a.model, cfg);
    } else {
      railyard::LoadedCheckpoint c =
          railyard::read_checkpoint(a.model, railyard::gpt_checkpoint_schema());
      cfg = railyard::gpt_config_from(c.model);
      params = std::move(c.state.params);
    }
    const std::vector<int32_t> prompt = prompt_tokens(a, cfg.vocab);
    if (!a.dump.empty()) dump_logits(a, cfg, params, prompt);
    print_result(prompt, railyard::sample_gpt(cfg, params, prompt, a.opts), cfg.vocab);
    return railyard::exit_code::kOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "railyard-ckpt sample: %s\n", e.what());
    return railyard::exit_code::kFailure;
  }
}
