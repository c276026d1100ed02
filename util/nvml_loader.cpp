#include "railyard/nvml_loader.hpp"

#include <dlfcn.h>

namespace railyard {
namespace {

using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlErrorString = const char* (*)(int);
using NvmlGetDriverVersion = int (*)(char*, unsigned int);
using NvmlGetCudaDriverVersion = int (*)(int*);
constexpr unsigned kDriverVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

}  // namespace

NvmlLibrary::NvmlLibrary(const std::string& path) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* message = dlerror();
    why_ = "cannot load " + path + (message ? std::string(": ") + message : std::string());
    return;
  }
  const auto init = symbol<NvmlInit>("nvmlInit_v2");
  shutdown_ = symbol<NvmlShutdown>("nvmlShutdown");
  // Only for messages: NVML without it still works.
  error_string_ = reinterpret_cast<NvmlErrorString>(dlsym(handle_, "nvmlErrorString"));
  if (init == nullptr || shutdown_ == nullptr) return;
  if (const int rc = init(); rc != 0) {
    why_ = "nvmlInit failed: " + error(rc);
    return;
  }
  initialized_ = true;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) shutdown_();
  if (handle_ != nullptr) dlclose(handle_);
}

void* NvmlLibrary::raw_symbol(const char* name) {
  void* fn = handle_ != nullptr ? dlsym(handle_, name) : nullptr;
  if (fn == nullptr && why_.empty()) why_ = std::string("NVML has no symbol ") + name;
  return fn;
}

std::string NvmlLibrary::error(int code) const {
  return error_string_ ? error_string_(code) : "NVML error " + std::to_string(code);
}

std::optional<NvmlDriver> query_nvml_driver() noexcept {
  try {
    NvmlLibrary nvml;
    if (!nvml.ok()) return std::nullopt;
    const auto driver_version = nvml.symbol<NvmlGetDriverVersion>("nvmlSystemGetDriverVersion");
    const auto cuda_version =
        nvml.symbol<NvmlGetCudaDriverVersion>("nvmlSystemGetCudaDriverVersion_v2");
    if (!driver_version || !cuda_version) return std::nullopt;
    char buffer[kDriverVersionBufferSize] = {};
    NvmlDriver out;
    if (driver_version(buffer, sizeof buffer) != 0 || cuda_version(&out.cuda_driver_version) != 0) {
      return std::nullopt;
    }
    out.driver_version = buffer;
    return out;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace railyard
