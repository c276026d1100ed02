#include "railyard/data_loader.hpp"

#include <numeric>
#include <span>
#include <stdexcept>
#include <string>

#include "railyard/splitmix64.hpp"

namespace railyard {
namespace {

// Uniform in [0, n) by rejection (unbiased).
uint64_t below(uint64_t& state, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = splitmix64_next(state);
  } while (x >= limit);
  return x % n;
}

std::string file_list(const TokenDataset& data) {
  std::string s;
  for (const TokenFileInfo& f : data.files()) s += (s.empty() ? "'" : ", '") + f.path + "'";
  return s;
}

}  // namespace

DataLoader::DataLoader(const TokenDataset& data, int B, int T, int rank, int world, uint64_t seed,
                       bool shuffle)
    : data_(&data), B_(B), T_(T), rank_(rank), world_(world), shuffle_(shuffle) {
  if (B <= 0 || T <= 0 || world <= 0 || rank < 0 || rank >= world) {
    throw std::invalid_argument("DataLoader: B, T and world must be positive, 0 <= rank < world");
  }
  sequences_ =
      data.size() > static_cast<size_t>(T) ? (data.size() - 1) / static_cast<size_t>(T) : 0;
  const size_t global = static_cast<size_t>(world) * static_cast<size_t>(B);
  if (sequences_ == 0) {
    throw DataError("token data " + file_list(data) + ": " + std::to_string(data.size()) +
                    " tokens are shorter than one sequence of " + std::to_string(T + 1) +
                    " tokens (lower --seq or add data)");
  }
  if (sequences_ < global) {
    throw DataError("token data " + file_list(data) + ": " + std::to_string(sequences_) +
                    " sequences of " + std::to_string(T + 1) + " tokens, but one global batch " +
                    "needs " + std::to_string(global) +
                    " (ranks x --batch); lower --batch or --seq");
  }
  if (sequences_ > UINT32_MAX) {
    throw DataError("token data " + file_list(data) + ": more than 2^32 sequences; raise --seq");
  }
  pos_.seed = seed;
}

void DataLoader::build_order() {
  if (!shuffle_ || order_epoch_ == pos_.epoch) return;
  order_.resize(sequences_);
  std::iota(order_.begin(), order_.end(), 0u);
  uint64_t state = pos_.seed ^ (0xD1B54A32D192ED03ull * (pos_.epoch + 1));
  for (size_t i = sequences_ - 1; i > 0; --i) {
    std::swap(order_[i], order_[below(state, i + 1)]);
  }
  order_epoch_ = pos_.epoch;
}

void DataLoader::next(Batch& out) {
  const size_t global = static_cast<size_t>(world_) * static_cast<size_t>(B_);
  if (pos_.cursor + global > sequences_) {  // the epoch's remainder is dropped
    ++pos_.epoch;
    pos_.cursor = 0;
  }
  build_order();
  const size_t T = static_cast<size_t>(T_);
  out.inputs.resize(static_cast<size_t>(B_) * T);
  out.targets.resize(static_cast<size_t>(B_) * T);
  std::vector<int32_t> seq(T + 1);
  for (int b = 0; b < B_; ++b) {
    size_t k =
        pos_.cursor + static_cast<size_t>(rank_) * static_cast<size_t>(B_) + static_cast<size_t>(b);
    size_t index = shuffle_ ? order_[k] : k;
    data_->read(index * T, seq);
    std::copy(seq.begin(), seq.end() - 1, out.inputs.begin() + static_cast<ptrdiff_t>(b * T));
    std::copy(seq.begin() + 1, seq.end(), out.targets.begin() + static_cast<ptrdiff_t>(b * T));
  }
  pos_.cursor += global;
}

void DataLoader::set_position(const LoaderPosition& pos) {
  if (pos.seed != pos_.seed) {
    throw std::invalid_argument("data loader: saved position has seed " + std::to_string(pos.seed) +
                                ", this run uses " + std::to_string(pos_.seed) +
                                " (use the same --seed to resume)");
  }
  if (pos.cursor > sequences_) {
    throw std::invalid_argument("data loader: saved cursor " + std::to_string(pos.cursor) +
                                " is past the " + std::to_string(sequences_) +
                                " sequences of this data (different --data or --seq?)");
  }
  pos_ = pos;
}

}  // namespace railyard
