#include "l2_persistence.hpp"

#include <algorithm>

#include "cuda_check.hpp"

namespace railyard::cuda {

size_t keep_in_l2(cudaStream_t stream, int device, const void* base, size_t bytes) {
  int set_aside_max = 0, window_max = 0;
  RY_CUDA(cudaDeviceGetAttribute(&set_aside_max, cudaDevAttrMaxPersistingL2CacheSize, device));
  RY_CUDA(cudaDeviceGetAttribute(&window_max, cudaDevAttrMaxAccessPolicyWindowSize, device));
  const size_t kept =
      std::min({bytes, size_t(std::max(set_aside_max, 0)), size_t(std::max(window_max, 0))});
  if (kept == 0) return 0;
  RY_CUDA(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, kept));
  cudaStreamAttrValue attr{};
  attr.accessPolicyWindow.base_ptr = const_cast<void*>(base);
  attr.accessPolicyWindow.num_bytes = kept;
  attr.accessPolicyWindow.hitRatio = 1.0f;  // the window fits the set-aside: all of it persists
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  RY_CUDA(cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &attr));
  return kept;
}

}  // namespace railyard::cuda
