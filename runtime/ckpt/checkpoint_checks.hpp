#pragma once
// What a checkpoint's values may be, checked before anything is sized from them or resumed with
// them (docs/checkpoint-format.md, "Limits"). A file can carry consistent checksums and still
// hold absurd values (a bug, a hostile edit): each check names the field, its value and the
// allowed range.

#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint_format.hpp"

namespace railyard::ckpt_checks {

constexpr uint64_t kMaxWorldSize = uint64_t{1} << 20;
constexpr uint64_t kMaxLoaderEpoch = uint64_t{1} << 32;
constexpr uint64_t kMaxConfigJsonBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxRngWords = 4096;

// Every root field in range; throws std::runtime_error otherwise. (The /model attributes are
// the schema's to check: CheckpointSchema::elements.)
void check_ranges(const ckpt_format::StoredMeta& m);
// After check_ranges: the narrowed Meta.
ckpt_format::Meta to_meta(const ckpt_format::StoredMeta& m);
// The params and both Adam moments the /model attributes describe (`elements` each) are stored
// uncompressed, so they cannot exceed the file: refuses before allocating memory for them.
void check_fits_file(double elements, uint64_t file_bytes);
// A 1-D dataset's declared length against a limit and the file's size, before allocating.
void check_declared_length(const std::string& dataset, uint64_t elems, uint64_t elem_bytes,
                           uint64_t limit, uint64_t file_bytes);
// Every value finite (and, for Adam's second moment, not negative): a diverged run's state is
// not a checkpoint to resume from.
void check_values(const std::string& dataset, const float* v, size_t n, bool non_negative);

}  // namespace railyard::ckpt_checks
