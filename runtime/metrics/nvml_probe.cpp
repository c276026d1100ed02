#include "railyard/nvml_probe.hpp"

#include "railyard/contract_env.hpp"
#include "railyard/env.hpp"
#include "railyard/nvml_loader.hpp"
#include "railyard/strings.hpp"

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

using HandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using HandleByStringFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using MemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using UtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);

}  // namespace

struct NvmlProbe::Impl {
  explicit Impl(const std::string& library) : nvml(library) {}
  NvmlLibrary nvml;
  nvmlDevice_t device = nullptr;
  std::string why;
  MemoryInfoFn memory_info = nullptr;
  UtilizationFn utilization = nullptr;
};

NvmlProbe::NvmlProbe(const std::string& device, const std::string& library)
    : impl_(std::make_unique<Impl>(library)) {
  Impl& d = *impl_;
  NvmlLibrary& nvml = d.nvml;
  const auto by_index = nvml.symbol<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  const auto by_pci = nvml.symbol<HandleByStringFn>("nvmlDeviceGetHandleByPciBusId_v2");
  const auto by_uuid = nvml.symbol<HandleByStringFn>("nvmlDeviceGetHandleByUUID");
  d.memory_info = nvml.symbol<MemoryInfoFn>("nvmlDeviceGetMemoryInfo");
  d.utilization = nvml.symbol<UtilizationFn>("nvmlDeviceGetUtilizationRates");
  if (!nvml.ok() || !nvml.why().empty()) {
    d.why = nvml.why();
    return;
  }
  nvmlReturn_t rc;
  if (all_digits(device)) {
    rc = by_index(static_cast<unsigned int>(std::strtoul(device.c_str(), nullptr, 10)), &d.device);
  } else if (device.starts_with("GPU-") || device.starts_with("MIG-")) {
    rc = by_uuid(device.c_str(), &d.device);
  } else {
    rc = by_pci(device.c_str(), &d.device);
  }
  if (rc != kNvmlSuccess) {
    d.why = "NVML cannot find GPU '" + device + "': " + nvml.error(rc);
    d.device = nullptr;
  }
}

NvmlProbe::~NvmlProbe() = default;

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
  // Both are lists, this process's own device first.
  if (const auto bus = env_value(contract_env::kGpuPci)) return split(*bus, ',').front();
  if (const auto visible = env_value("CUDA_VISIBLE_DEVICES")) return split(*visible, ',').front();
  return "0";
}

}  // namespace railyard
