#pragma once
// Runs a checkpoint read in a forked child process with a memory and a time limit. HDF5 is not
// hardened against hostile files: a damaged object header can crash it (SIGSEGV) or make it
// allocate or loop without bound. In a child, such a file costs a failed check, not the job.

#include <cstdint>
#include <functional>
#include <string>

namespace railyard::isolated {

struct Outcome {
  bool ok = false;
  int64_t step = -1;  // what `read` returned
  std::string error;  // why not ok: the read's message, or how the child died
};

// Calls `read` in a child process limited to about 4 x `file_bytes` + 512 MiB of new address
// space and 60 s + 1 s per 20 MB of the file. `read` throws std::exception on an invalid file.
// The caller holds h5::hdf5_mutex() (no other thread is inside HDF5 when the child is forked).
Outcome run(uint64_t file_bytes, const std::function<int64_t()>& read);

}  // namespace railyard::isolated
