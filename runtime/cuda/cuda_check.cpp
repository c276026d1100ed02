#include "cuda_check.hpp"

#include <stdexcept>
#include <string>

namespace railyard::cuda {

namespace {
std::string where(const char* what, const char* file, int line) {
  return std::string(what) + " at " + file + ":" + std::to_string(line);
}
}  // namespace

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  throw std::runtime_error("CUDA error " + std::string(cudaGetErrorName(err)) + " (" +
                           cudaGetErrorString(err) + ") in " + where(what, file, line));
}

void throw_cublas_error(cublasStatus_t st, const char* what, const char* file, int line) {
  throw std::runtime_error("cuBLASLt error " + std::to_string(static_cast<int>(st)) + " (" +
                           cublasLtGetStatusString(st) + ") in " + where(what, file, line));
}

}  // namespace railyard::cuda
