#pragma once
// Writes one checkpoint file's contents (not its durability: the store fsyncs and renames).
// Either one process writes everything (serial HDF5, or state gathered to rank 0), or, with
// parallel HDF5, every rank writes its shard of each tensor as a hyperslab, collectively.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_format.hpp"
#include "railyard/checkpoint_schema.hpp"

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

// Where each tensor's bytes go in the file: offset[array][tensor index], array 0 params, 1 m,
// 2 v (ckpt_format::kTensorGroups), tensors in layout order.
struct TensorOffsets {
  std::array<std::vector<uint64_t>, 3> offset;
};

// One process creates the whole file but the tensors' bytes: every attribute, the small
// datasets, and each tensor's contiguous dataset with its space allocated (datasets of 64 KiB
// and more at 4096-aligned offsets) and a checksum of 0. The file is closed when this returns;
// the caller writes the tensors' bytes at the offsets returned, then write_tensor_checksums.
// Throws std::runtime_error with HDF5's reason.
TensorOffsets write_checkpoint_skeleton(const std::string& path, const StoredTensors& layout,
                                        const ckpt_format::Meta& meta);
// Sets each tensor dataset's checksum attribute: digests[array][tensor index].
void write_tensor_checksums(const std::string& path, const StoredTensors& layout,
                            const std::array<std::vector<uint64_t>, 3>& digests);

#if RAILYARD_PARALLEL_HDF5
// Collective over comm: rank r writes its slice; the slices partition [0, layout.total) in
// rank order. Every rank throws the same error when any rank fails.
void write_checkpoint_collective(Communicator& comm, const std::string& path,
                                 const StoredTensors& layout, const ckpt_format::Meta& meta,
                                 const WriteSlice& slice);
#endif

}  // namespace railyard
