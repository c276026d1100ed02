#pragma once
// Writes one checkpoint file's contents (not its durability: the store fsyncs and renames).
// Either one process writes everything (serial HDF5, or state gathered to rank 0), or, with
// parallel HDF5, every rank writes its shard of each tensor as a hyperslab, collectively.

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_format.hpp"
#include "railyard/param_layout.hpp"

namespace railyard {

class Communicator;

// The part of the flat state this process writes: params, m and v over [begin, end).
// `params` points at the whole flat buffer; `m` and `v` at element `begin`.
struct WriteSlice {
  const float* params = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;
  size_t begin = 0;
  size_t end = 0;
};

// One process writes the whole file (slice must cover [0, layout.total())). Throws
// std::runtime_error with HDF5's reason.
void write_checkpoint_file(const std::string& path, const ParamLayout& layout,
                           const ckpt_format::Meta& meta, const WriteSlice& slice);

#if RAILYARD_PARALLEL_HDF5
// Collective over comm: rank r writes its slice; the slices partition [0, layout.total()) in
// rank order. Every rank throws the same error when any rank fails.
void write_checkpoint_collective(Communicator& comm, const std::string& path,
                                 const ParamLayout& layout, const ckpt_format::Meta& meta,
                                 const WriteSlice& slice);
#endif

}  // namespace railyard
