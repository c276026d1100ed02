#pragma once
// The bulk of a load: the tensors' raw bytes, read straight from their contiguous datasets'
// file offsets with pread on several threads and each checked against its stored XXH3-64, so
// load + verify runs near the file's read rate instead of one HDF5 read and one hash at a time.
// HDF5 still opens the file and checks every dataset's type, shape and layout first
// (checkpoint_reader.cpp); only datasets it reports as contiguous little-endian float32 of the
// expected size come here.

#include <cstddef>
#include <cstdint>
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

// Reads every tensor into its dst and verifies it. Throws std::runtime_error naming the first
// bad dataset (in `reads` order): a checksum mismatch, or bytes missing past the end of the file.
void read_tensors_verified(const std::string& path, const std::vector<TensorRead>& reads);

// "checksum mismatch in dataset NAME (stored X, computed Y): the file is damaged".
std::string checksum_mismatch(const std::string& name, uint64_t stored, uint64_t computed);

}  // namespace railyard
