// railyard-data: make and inspect token datasets for railyard-train (docs/training.md).
//   railyard-data text FILE... -o OUT.h5         byte-level tokens, vocab 256
//   railyard-data synthetic --tokens N --vocab V [--seed S] -o OUT.h5
//   railyard-data from-bin SHARD... [--vocab V] -o OUT.h5   llm.c .bin / .npy -> one HDF5
//   railyard-data inspect FILE...
#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "railyard/exit_code.hpp"
#include "railyard/input_file.hpp"
#include "railyard/token_dataset.hpp"

namespace po = boost::program_options;
using railyard::DataError;
using railyard::TokenDataset;

namespace {

using railyard::exit_code::kUsage;

const char* kUsageText =
    "Usage:\n"
    "  railyard-data text FILE... -o OUT.h5        bytes of the files as tokens (vocab 256)\n"
    "  railyard-data synthetic --tokens N --vocab V [--seed S] -o OUT.h5\n"
    "                                              uniformly random tokens\n"
    "  railyard-data from-bin SHARD... [--vocab V] -o OUT.h5\n"
    "                                              llm.c .bin shards or NumPy .npy arrays\n"
    "                                              (1-D '<u2'/'<u4'), concatenated; --vocab\n"
    "                                              declares the vocabulary (.npy has none)\n"
    "  railyard-data inspect FILE...               format, size, vocabulary, unigram entropy\n";

struct Args {
  std::vector<std::string> files;
  std::string out;
  int64_t tokens = 0;
  int64_t vocab = 0;
  uint64_t seed = 1;
};

// Parses the options after the subcommand; `generator` adds --tokens/--vocab/--seed,
// `declare_vocab` an optional --vocab.
Args parse(int argc, char** argv, bool needs_out, bool generator, bool declare_vocab = false) {
  Args a;
  po::options_description desc;
  desc.add_options()("files", po::value(&a.files)->multitoken(), "input files")(
      "output,o", po::value(&a.out), "output HDF5 file");
  if (generator) {
    desc.add_options()("tokens", po::value(&a.tokens)->required(), "number of tokens")(
        "vocab", po::value(&a.vocab)->required(), "vocabulary size")(
        "seed", po::value(&a.seed)->default_value(1), "random seed");
  } else if (declare_vocab) {
    desc.add_options()("vocab", po::value(&a.vocab), "vocabulary size to declare");
  }
  po::positional_options_description pos;
  pos.add("files", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(argc, argv).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  if (needs_out && a.out.empty()) throw po::error("-o OUT.h5 is required");
  for (const std::string& f : a.files) {
    if (needs_out) railyard::refuse_output_over_input(a.out, f);
  }
  if (!generator && a.files.empty()) throw po::error("no input files given");
  if (generator && !a.files.empty()) throw po::error("synthetic takes no input files");
  return a;
}

// One line per input file, so a long conversion shows where it is.
void progress(size_t done, size_t total, const std::string& file, size_t tokens) {
  std::printf("[%zu/%zu] %s | %zu tokens so far\n", done, total, file.c_str(), tokens);
  std::fflush(stdout);
}

int text(const Args& a) {
  std::vector<uint32_t> tokens;
  for (size_t i = 0; i < a.files.size(); ++i) {
    const std::string& f = a.files[i];
    const std::string problem = railyard::input_file_problem(f);
    if (!problem.empty()) throw DataError("text '" + f + "' " + problem);
    std::ifstream in(f, std::ios::binary);
    if (!in) throw DataError("text '" + f + "': cannot be read");
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    tokens.insert(tokens.end(), bytes.begin(), bytes.end());
    progress(i + 1, a.files.size(), f, tokens.size());
  }
  if (tokens.empty()) {
    throw DataError("text: the input files are empty: a dataset of 0 tokens cannot train");
  }
  railyard::write_token_file(a.out, tokens, 256);
  std::printf("%s: %zu tokens from %zu files, vocab 256\n", a.out.c_str(), tokens.size(),
              a.files.size());
  return 0;
}

int synthetic(const Args& a) {
  if (a.tokens <= 0) throw po::error("--tokens must be positive");
  if (a.vocab <= 0 || a.vocab > (int64_t{1} << 31) - 1) {
    throw po::error("--vocab must be in [1, 2^31)");
  }
  std::vector<uint32_t> tokens(static_cast<size_t>(a.tokens));
  uint64_t state = a.seed;
  for (uint32_t& t : tokens) {
    // SplitMix64, so the file is the same on every machine.
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    t = static_cast<uint32_t>(z % static_cast<uint64_t>(a.vocab));
  }
  railyard::write_token_file(a.out, tokens, static_cast<int>(a.vocab));
  std::printf("%s: %zu tokens, vocab %lld\n", a.out.c_str(), tokens.size(),
              static_cast<long long>(a.vocab));
  return 0;
}

int from_bin(const Args& a) {
  std::vector<uint32_t> tokens;
  int vocab = 0;
  for (size_t i = 0; i < a.files.size(); ++i) {
    TokenDataset d({a.files[i]});  // one at a time: each shard is checked, then released
    if (d.files()[0].format == "hdf5") {
      throw DataError("from-bin '" + a.files[i] + "': not an llm.c .bin shard or .npy array");
    }
    std::vector<int32_t> part(d.size());
    d.read(0, part);
    tokens.insert(tokens.end(), part.begin(), part.end());
    vocab = std::max(vocab, d.vocab());
    progress(i + 1, a.files.size(), a.files[i], tokens.size());
  }
  if (a.vocab > 0) {
    // .npy arrays declare no vocabulary (their largest token + 1 stands in): say the real one.
    if (a.vocab < vocab || a.vocab > INT32_MAX) {
      throw po::error("--vocab " + std::to_string(a.vocab) + " is below the inputs' vocabulary " +
                      std::to_string(vocab) + " or above 2^31 - 1");
    }
    vocab = static_cast<int>(a.vocab);
  }
  railyard::write_token_file(a.out, tokens, vocab);
  std::printf("%s: %zu tokens from %zu shards, vocab %d\n", a.out.c_str(), tokens.size(),
              a.files.size(), vocab);
  return 0;
}

int inspect(const Args& a) {
  for (const std::string& path : a.files) {
    TokenDataset d({path});
    const auto& f = d.files()[0];
    std::vector<int32_t> all(d.size());
    d.read(0, all);
    std::vector<uint64_t> counts(static_cast<size_t>(f.max_token) + 1);
    for (int32_t t : all) ++counts[static_cast<size_t>(t)];
    double entropy = 0;
    size_t distinct = 0;
    for (uint64_t c : counts) {
      if (c == 0) continue;
      ++distinct;
      double p = static_cast<double>(c) / static_cast<double>(all.size());
      entropy -= p * std::log(p);
    }
    std::printf(
        "%s\n  format: %s (uint%d)\n  tokens: %zu\n  vocab_size: %d\n  max token: %u\n"
        "  distinct tokens: %zu\n  unigram entropy: %.4f nats\n",
        path.c_str(), f.format.c_str(), 8 * f.token_bytes, f.tokens, f.vocab, f.max_token, distinct,
        entropy);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsageText, argc < 2 ? stderr : stdout);
    return argc < 2 ? kUsage : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "text") return text(parse(argc - 1, argv + 1, true, false));
    if (cmd == "synthetic") return synthetic(parse(argc - 1, argv + 1, true, true));
    if (cmd == "from-bin") return from_bin(parse(argc - 1, argv + 1, true, false, true));
    if (cmd == "inspect") return inspect(parse(argc - 1, argv + 1, false, false));
    std::fprintf(stderr, "railyard-data: unknown command '%s'\n%s", cmd.c_str(), kUsageText);
    return kUsage;
  } catch (const po::error& e) {
    std::fprintf(stderr, "railyard-data %s: %s\n%s", cmd.c_str(), e.what(), kUsageText);
    return kUsage;
  } catch (const DataError& e) {
    std::fprintf(stderr, "railyard-data %s: %s\n", cmd.c_str(), e.what());
    return kUsage;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "railyard-data %s: %s\n", cmd.c_str(), e.what());
    return kUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "railyard-data %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
