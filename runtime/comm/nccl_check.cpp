#include "nccl_check.hpp"

#include <stdexcept>
#include <string>

namespace railyard::cuda {

void throw_nccl_error(ncclResult_t r, const char* what, const char* file, int line) {
  throw std::runtime_error("NCCL error " + std::to_string(static_cast<int>(r)) + " (" +
                           ncclGetErrorString(r) + ") in " + what + " at " + file + ":" +
                           std::to_string(line) + "; set NCCL_DEBUG=INFO for details");
}

}  // namespace railyard::cuda
