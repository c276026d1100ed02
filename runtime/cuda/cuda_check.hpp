#pragma once
// Error checks for CUDA runtime and cuBLASLt returns: each failure becomes a std::runtime_error
// naming the call, the file and line, and the library's own message. NCCL's are in
// runtime/comm/nccl_check.hpp: kernels know nothing of NCCL.

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace railyard::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t st, const char* what, const char* file,
                                     int line);

inline void check_cuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) throw_cuda_error(err, what, file, line);
}
inline void check_cublas(cublasStatus_t st, const char* what, const char* file, int line) {
  if (st != CUBLAS_STATUS_SUCCESS) throw_cublas_error(st, what, file, line);
}

}  // namespace railyard::cuda

#define RY_CUDA(call) ::railyard::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define RY_CUBLAS(call) ::railyard::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: a bad configuration shows up here, not at the launch itself.
#define RY_CUDA_LAUNCHED() \
  ::railyard::cuda::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
