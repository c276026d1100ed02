#include <cuda_runtime.h>

#include "railyard/cuda_engine.hpp"

namespace railyard {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // a missing driver is an answer here, not a sticky error for later calls
    return 0;
  }
  return count;
}

}  // namespace railyard
