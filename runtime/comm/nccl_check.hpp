#pragma once
// Error check for NCCL returns: a failure becomes a std::runtime_error naming the call, the file
// and line, and NCCL's own message.

#include <nccl.h>

namespace railyard::cuda {

[[noreturn]] void throw_nccl_error(ncclResult_t r, const char* what, const char* file, int line);

inline void check_nccl(ncclResult_t r, const char* what, const char* file, int line) {
  if (r != ncclSuccess) throw_nccl_error(r, what, file, line);
}

}  // namespace railyard::cuda

#define RY_NCCL(call) ::railyard::cuda::check_nccl((call), #call, __FILE__, __LINE__)
