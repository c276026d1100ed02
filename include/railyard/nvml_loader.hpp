#pragma once
// NVML, opened at run time: nothing railyard builds links libnvidia-ml, so the plugin loads and
// the runtime runs on nodes without an NVIDIA driver. The plugin's driver check and the
// runtime's GPU metrics both open it through NvmlLibrary.

#include <optional>
#include <string>

namespace railyard {

class NvmlLibrary {
 public:
  // dlopens `path` and initialises NVML (nvmlInit_v2). Never throws: on failure ok() is false
  // and why() says what failed ("cannot load ...", "nvmlInit failed: ...").
  explicit NvmlLibrary(const std::string& path = "libnvidia-ml.so.1");
  ~NvmlLibrary();  // nvmlShutdown, dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool ok() const { return initialized_; }
  const std::string& why() const { return why_; }

  // The entry point `name`, with the signature F of nvml.h (not included: the build needs
  // neither the driver nor its headers); nullptr, with why() naming it, when NVML lacks it.
  template <typename F>
  F symbol(const char* name) {
    return reinterpret_cast<F>(raw_symbol(name));
  }
  // NVML's message for a return code (NVML_SUCCESS is 0).
  std::string error(int code) const;

 private:
  void* raw_symbol(const char* name);

  void* handle_ = nullptr;
  bool initialized_ = false;
  std::string why_;
  int (*shutdown_)() = nullptr;
  const char* (*error_string_)(int) = nullptr;
};

struct NvmlDriver {
  std::string driver_version;   // nvmlSystemGetDriverVersion, e.g. "550.54.14"
  int cuda_driver_version = 0;  // nvmlSystemGetCudaDriverVersion_v2, e.g. 12040 for 12.4
};

// The driver as NVML reports it; nullopt when libnvidia-ml.so.1 is absent or NVML cannot
// initialise (no driver loaded). Throws nothing.
std::optional<NvmlDriver> query_nvml_driver() noexcept;

}  // namespace railyard
