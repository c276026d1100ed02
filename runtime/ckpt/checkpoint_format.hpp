#pragma once
// Names and constants of the checkpoint file (docs/checkpoint-format.md), shared by the writer,
// the reader and the store.

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "railyard/checkpoint_schema.hpp"
#include "railyard/iso_time.hpp"
#include "railyard/train_state.hpp"

namespace railyard::ckpt_format {

constexpr int64_t kVersion = 1;
constexpr const char* kChecksumAttr = "xxh3_64";
constexpr const char* kMetaChecksumAttr = "meta_xxh3_64";
// The groups of the three flat arrays, in StateArray order: params, Adam m, Adam v.
constexpr std::array<const char*, 3> kTensorGroups = {"params", "adam/m", "adam/v"};

// What the root and /model attributes hold, besides the datasets.
struct Meta {
  Attributes model;        // the /model attributes, in the schema's order
  TrainProgress progress;  // rng_state and config_json are datasets, not covered here
  int64_t adam_step = 0;
  double created_unix = 0;
};

// The scalar metadata as stored (every int64 attribute whole, before narrowing to int), so the
// checksum covers each stored byte and a flipped high bit cannot hide behind a cast.
struct StoredMeta {
  int64_t step = 0, tokens_seen = 0, adam_step = 0, world_size = 0;
  double lr = 0;
  uint64_t loader_seed = 0, loader_epoch = 0, loader_cursor = 0;
  Attributes model;  // the /model attributes as stored, in the schema's order
};
StoredMeta stored_meta(const Meta& meta);

// XXH3-64 of the scalar metadata packed little-endian in this order (docs give the Python):
// format_version, step, tokens_seen, adam_step, world_size (int64), lr (float64),
// loader_seed, loader_epoch, loader_cursor (uint64), then the /model attributes in the
// schema's order: int64 and float64 as 8 bytes, a string as its byte length (uint64) and its
// bytes. (For the GPT: vocab, padded_vocab, max_seq, layers, heads, dim, all int64.)
uint64_t meta_checksum(const StoredMeta& meta, int64_t format_version);
uint64_t meta_checksum(const Meta& meta, int64_t format_version);

// "ckpt-00001234.h5", and its temporary ".ckpt-00001234.h5.tmp-<pid>".
std::string file_name(int64_t step);
std::string temp_name(int64_t step, long pid);
// The step of a checkpoint file name; nullopt for any other name.
std::optional<int64_t> step_of(const std::string& name);
bool is_temp_name(const std::string& name);

using railyard::iso_time;  // the "created" attribute's format

}  // namespace railyard::ckpt_format
