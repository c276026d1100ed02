#pragma once
// Batches of training sequences for one rank of a data-parallel job.
//
// The token stream is cut into sequences of T+1 tokens (inputs and next-token targets) that
// start every T tokens. An epoch visits every sequence once, in an order that is a function of
// (seed, epoch) only. A global micro-batch is the next world*B sequences of that order; rank r
// takes the r-th block of B, so ranks read disjoint data and the union over ranks is the same
// for any world size with the same world*B. The position counts global sequences, so a
// checkpoint restores it on any number of ranks.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "railyard/token_dataset.hpp"
#include "railyard/train_state.hpp"

namespace railyard {

struct Batch {
  std::vector<int32_t> inputs;   // B*T, row-major
  std::vector<int32_t> targets;  // B*T, inputs shifted by one token
};

class DataLoader {
 public:
  // `shuffle` false visits sequences in file order (validation). Throws DataError naming the
  // files when the data holds fewer than world*B sequences of T+1 tokens.
  DataLoader(const TokenDataset& data, int B, int T, int rank, int world, uint64_t seed,
             bool shuffle = true);

  // This rank's part of the next global micro-batch; advances the position by world*B.
  void next(Batch& out);
  LoaderPosition position() const { return pos_; }
  // Continues from a saved position. Throws std::invalid_argument when it does not fit this
  // data (a seed other than this loader's, or a cursor past the epoch).
  void set_position(const LoaderPosition& pos);
  size_t sequences_per_epoch() const { return sequences_; }

 private:
  void build_order();

  const TokenDataset* data_;
  int B_, T_, rank_, world_;
  bool shuffle_;
  size_t sequences_;
  LoaderPosition pos_;
  std::vector<uint32_t> order_;  // this epoch's permutation (empty when not shuffling)
  uint64_t order_epoch_ = UINT64_MAX;
};

}  // namespace railyard
