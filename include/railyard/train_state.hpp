#pragma once
// Host-side training state: what a checkpoint holds and what resume restores.
// Model code fills ModelState; the trainer fills TrainProgress; the checkpoint writer stores
// both without knowing which backend produced them.

#include <cstdint>
#include <string>
#include <vector>

#include "railyard/float_array.hpp"

namespace railyard {

// Parameters (fp32 master copy) and AdamW moments over the flat index space of a ParamLayout.
// `params` always holds every element [0, layout.total()). `m` and `v` hold the elements
// [shard_begin, shard_end): the whole range without ZeRO, this rank's shard with ZeRO-1.
// The arrays' resize() leaves new elements unset (float_array.hpp).
struct ModelState {
  FloatArray params;
  FloatArray m;
  FloatArray v;
  size_t shard_begin = 0;
  size_t shard_end = 0;
  int64_t adam_step = 0;  // AdamW's t (bias correction)
};

// Where the data loader stands: enough to continue the same sample order exactly.
struct LoaderPosition {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t cursor = 0;  // global sequences consumed in this epoch (independent of world size)
};

struct TrainProgress {
  int64_t step = 0;         // optimizer steps completed
  int64_t tokens_seen = 0;  // global tokens consumed by those steps
  double lr = 0.0;          // learning rate of the last completed step (schedule position = step)
  LoaderPosition loader;
  std::vector<uint64_t> rng_state;  // the trainer's RNG words, opaque to the writer
  int world_size = 1;
  std::string config_json;  // the run's resolved configuration
};

}  // namespace railyard
