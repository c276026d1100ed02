#include "railyard/nvml_loader.hpp"

#include <dlfcn.h>

namespace railyard {
namespace {

// The few NVML entry points used, with the signatures of nvml.h (not included: the plugin
// builds on machines without the CUDA toolkit). NVML_SUCCESS is 0.
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlGetDriverVersion = int (*)(char*, unsigned int);
using NvmlGetCudaDriverVersion = int (*)(int*);
constexpr unsigned kDriverVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

// Closes the library however the query ends.
struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) dlclose(handle);
  }
  template <typename F>
  F symbol(const char* name) const {
    return reinterpret_cast<F>(dlsym(handle, name));
  }
};

}  // namespace

std::optional<NvmlDriver> query_nvml_driver() noexcept {
  try {
    Library lib{dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)};
    if (!lib.handle) return std::nullopt;
    const auto init = lib.symbol<NvmlInit>("nvmlInit_v2");
    const auto shutdown = lib.symbol<NvmlShutdown>("nvmlShutdown");
    const auto driver_version = lib.symbol<NvmlGetDriverVersion>("nvmlSystemGetDriverVersion");
    const auto cuda_version =
        lib.symbol<NvmlGetCudaDriverVersion>("nvmlSystemGetCudaDriverVersion_v2");
    if (!init || !shutdown || !driver_version || !cuda_version) return std::nullopt;
    if (init() != 0) return std::nullopt;
    char buffer[kDriverVersionBufferSize] = {};
    NvmlDriver out;
    const bool ok =
        driver_version(buffer, sizeof buffer) == 0 && cuda_version(&out.cuda_driver_version) == 0;
    shutdown();
    if (!ok) return std::nullopt;
    out.driver_version = buffer;
    return out;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace railyard
