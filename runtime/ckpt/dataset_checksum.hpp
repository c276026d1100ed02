#pragma once
// XXH3-64 of a dataset's raw little-endian bytes in row-major order: the per-dataset checksum of
// a checkpoint. The streaming form lets the parts of one tensor be hashed on the ranks that hold
// them, in order, with the state passed from rank to rank.

// The state struct is only visible with static-linking declarations (stable within one build).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace railyard {

uint64_t xxh3_64(const void* data, size_t bytes);

class Xxh3Stream {
 public:
  Xxh3Stream();
  void update(const void* data, size_t bytes);
  uint64_t digest() const;
  // The raw state, to send to the next rank (same binary on every rank).
  const void* state() const { return &state_; }
  static constexpr size_t state_bytes() { return sizeof(XXH3_state_t); }
  // Continues from a state received from another process. The state holds a pointer to the
  // library's default secret, valid only in the process that made it, so ours is kept.
  void adopt(const void* state_bytes);

 private:
  XXH3_state_t state_;
};

}  // namespace railyard
