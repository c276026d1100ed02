#include "railyard/nvml_probe.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace railyard {
namespace {

// The few NVML declarations used, as in nvml.h (stable ABI since NVML's v2 entry points);
// declared here so the build needs neither the driver nor its headers.
using nvmlReturn_t = int;
constexpr nvmlReturn_t kNvmlSuccess = 0;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using HandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using HandleByStringFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using MemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using UtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);

bool is_index(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

struct NvmlProbe::Impl {
  void* library = nullptr;
  bool initialized = false;
  nvmlDevice_t device = nullptr;
  std::string why;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  MemoryInfoFn memory_info = nullptr;
  UtilizationFn utilization = nullptr;

  template <typename Fn>
  Fn symbol(const char* name) {
    Fn fn = reinterpret_cast<Fn>(::dlsym(library, name));
    if (fn == nullptr && why.empty()) why = std::string("NVML has no symbol ") + name;
    return fn;
  }
  std::string error(nvmlReturn_t code) const {
    return error_string ? error_string(code) : "NVML error " + std::to_string(code);
  }
};

NvmlProbe::NvmlProbe(const std::string& device, const std::string& library)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.library = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (d.library == nullptr) {
    const char* message = ::dlerror();
    d.why = "cannot load " + library + (message ? std::string(": ") + message : std::string());
    return;
  }
  const auto init = d.symbol<InitFn>("nvmlInit_v2");
  d.shutdown = d.symbol<ShutdownFn>("nvmlShutdown");
  d.error_string = d.symbol<ErrorStringFn>("nvmlErrorString");
  const auto by_index = d.symbol<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  const auto by_pci = d.symbol<HandleByStringFn>("nvmlDeviceGetHandleByPciBusId_v2");
  const auto by_uuid = d.symbol<HandleByStringFn>("nvmlDeviceGetHandleByUUID");
  d.memory_info = d.symbol<MemoryInfoFn>("nvmlDeviceGetMemoryInfo");
  d.utilization = d.symbol<UtilizationFn>("nvmlDeviceGetUtilizationRates");
  if (!d.why.empty()) return;

  if (const nvmlReturn_t rc = init(); rc != kNvmlSuccess) {
    d.why = "nvmlInit failed: " + d.error(rc);
    return;
  }
  d.initialized = true;
  nvmlReturn_t rc;
  if (is_index(device)) {
    rc = by_index(static_cast<unsigned int>(std::strtoul(device.c_str(), nullptr, 10)), &d.device);
  } else if (device.starts_with("GPU-") || device.starts_with("MIG-")) {
    rc = by_uuid(device.c_str(), &d.device);
  } else {
    rc = by_pci(device.c_str(), &d.device);
  }
  if (rc != kNvmlSuccess) {
    d.why = "NVML cannot find GPU '" + device + "': " + d.error(rc);
    d.device = nullptr;
  }
}

NvmlProbe::~NvmlProbe() {
  if (impl_->initialized) impl_->shutdown();
  if (impl_->library != nullptr) ::dlclose(impl_->library);
}

bool NvmlProbe::available() const {
  return impl_->device != nullptr;
}

const std::string& NvmlProbe::why_unavailable() const {
  return impl_->why;
}

std::optional<GpuReading> NvmlProbe::read() const {
  if (!available()) return std::nullopt;
  nvmlMemory_t memory{};
  if (impl_->memory_info(impl_->device, &memory) != kNvmlSuccess) return std::nullopt;
  GpuReading reading;
  reading.mem_used = memory.used;
  reading.mem_total = memory.total;
  // MIG instances report no utilisation (NOT_SUPPORTED); the metric is then left out.
  nvmlUtilization_t utilization{};
  if (impl_->utilization(impl_->device, &utilization) == kNvmlSuccess) {
    reading.utilization = utilization.gpu / 100.0;
  }
  return reading;
}

std::string nvml_device_from_environment() {
  if (const char* bus = std::getenv("RAILYARD_GPU_PCI"); bus != nullptr && *bus) {
    return bus;
  }
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr && *visible) {
    const std::string list = visible;
    return list.substr(0, list.find(','));
  }
  return "0";
}

}  // namespace railyard
