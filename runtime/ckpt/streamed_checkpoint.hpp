#pragma once
// Writes one checkpoint file from a state snapshot at the disk's rate: HDF5 lays out the file
// (metadata, contiguous datasets at known offsets), then the tensors' bytes are streamed
// from the snapshot through a few staging buffers and written at those offsets with O_DIRECT
// where the filesystem allows, the copy (and its checksum) of one chunk overlapping the write of
// the previous one; last, each dataset's checksum attribute is set. The result is the same
// format version 1 file the HDF5 writer made. Durability is the caller's (fsync, rename).

#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint_format.hpp"
#include "railyard/checkpoint_schema.hpp"
#include "railyard/state_snapshot.hpp"

namespace railyard {

struct StreamOptions {
  size_t chunk_bytes = kStagingBytes;  // a multiple of 4096
  size_t buffers = kStagingBuffers;
  bool try_direct = true;  // false: page cache only
};

struct StreamStats {
  uint64_t tensor_bytes = 0;  // bytes streamed from the snapshot
  bool direct = false;        // O_DIRECT was used to the end
  double seconds = 0;         // layout to checksums, not durability
};

// One process writes the whole file; `snap` must hold the whole moments (shard [0, total)).
// Throws std::runtime_error or std::system_error naming what failed (ENOSPC, EFBIG, HDF5's
// reason, a failed copy out of the snapshot).
StreamStats write_checkpoint_streamed(const std::string& path, const StoredTensors& layout,
                                      const ckpt_format::Meta& meta, StateSnapshot& snap,
                                      const StreamOptions& options = {});

}  // namespace railyard
