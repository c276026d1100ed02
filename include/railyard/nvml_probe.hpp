#pragma once
// GPU memory and utilisation read through NVML, which is opened with dlopen: nothing links
// libnvidia-ml, and on a node without the NVIDIA driver the probe is simply unavailable.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace railyard {

struct GpuReading {
  uint64_t mem_used = 0, mem_total = 0;  // bytes, whole device (all processes)
  std::optional<double> utilization;     // 0..1 over NVML's last sample period; not on MIG
};

class NvmlProbe {
 public:
  // `device` names the GPU as NVML does: a PCI bus id ("0000:3b:00.0"), a UUID ("GPU-...",
  // "MIG-...") or an index. Never throws: any failure leaves the probe unavailable, with
  // why_unavailable() saying what failed.
  explicit NvmlProbe(const std::string& device, const std::string& library = "libnvidia-ml.so.1");
  ~NvmlProbe();
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  bool available() const;
  const std::string& why_unavailable() const;
  // nullopt when unavailable or when NVML fails this time.
  std::optional<GpuReading> read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The GPU this process drives, named for NVML: RAILYARD_GPU_PCI (the plugin's decision)
// when set, else the first entry of CUDA_VISIBLE_DEVICES (device 0 of the process), else "0".
std::string nvml_device_from_environment();

}  // namespace railyard
