#pragma once
// The bulk of a load: the tensors' raw bytes, read straight from their contiguous datasets'
// file offsets with pread on several threads and each checked against its stored XXH3-64, so
// load + verify runs near the file's read rate instead of one HDF5 read and one hash at a time.
// HDF5 still opens the file and checks every dataset's type, shape and layout first
// (checkpoint_reader.cpp); only datasets it reports as contiguous little-endian float32 of the
// expected size come here.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace railyard {

struct TensorRead {
  std::string name;     // "/params/wte", for messages
  uint64_t offset = 0;  // in the file
  size_t bytes = 0;
  void* dst = nullptr;
  uint64_t stored = 0;  // its xxh3_64 attribute
};

// Called for bytes [begin, begin + bytes) of reads[index] (whole elements: chunks are whole
// MiB) once they are read, on the reading thread, while they are in cache; throws std::exception
// to reject the tensor.
using ChunkCheck = std::function<void(size_t index, size_t begin, size_t bytes)>;

// Reads every tensor into its dst and verifies it: its checksum, and `check` on each chunk.
// A dst may be fresh, never-touched memory: each reading thread faults in the pages of the chunk
// it is about to read, so the kernel's page work is spread over the threads and done once.
// Throws std::runtime_error naming the first bad dataset (in `reads` order): a checksum
// mismatch, bytes missing past the end of the file, or what `check` threw.
void read_tensors_verified(const std::string& path, const std::vector<TensorRead>& reads,
                           const ChunkCheck& check = nullptr);

// "checksum mismatch in dataset NAME (stored X, computed Y): the file is damaged".
std::string checksum_mismatch(const std::string& name, uint64_t stored, uint64_t computed);

}  // namespace railyard
