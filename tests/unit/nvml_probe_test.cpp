#include "railyard/nvml_probe.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace railyard {
namespace {

TEST(NvmlProbe, AMissingLibraryLeavesTheProbeUnavailableWithTheReason) {
  NvmlProbe probe("0", "libnvidia-ml-absent-for-test.so.1");
  EXPECT_FALSE(probe.available());
  EXPECT_FALSE(probe.read().has_value());
  EXPECT_NE(probe.why_unavailable().find("libnvidia-ml-absent-for-test.so.1"), std::string::npos)
      << probe.why_unavailable();
}

TEST(NvmlProbe, ALibraryWithoutNvmlSymbolsIsUnavailable) {
  NvmlProbe probe("0", "libm.so.6");
  EXPECT_FALSE(probe.available());
  EXPECT_NE(probe.why_unavailable().find("nvmlInit_v2"), std::string::npos)
      << probe.why_unavailable();
}

// On a machine with the NVIDIA driver (the GPU machine) the probe reads device 0 for real.
TEST(NvmlProbe, ReadsDeviceZeroWhereTheDriverIsInstalled) {
  NvmlProbe probe("0");
  if (!probe.available()) GTEST_SKIP() << "no NVML here: " << probe.why_unavailable();
  const auto reading = probe.read();
  ASSERT_TRUE(reading.has_value());
  EXPECT_GT(reading->mem_total, 0u);
  EXPECT_LE(reading->mem_used, reading->mem_total);
  if (reading->utilization) {
    EXPECT_GE(*reading->utilization, 0.0);
    EXPECT_LE(*reading->utilization, 1.0);
  }
}

TEST(NvmlDeviceFromEnvironment, PrefersThePluginsBusIdThenTheFirstVisibleDevice) {
  ::unsetenv("RAILYARD_GPU_PCI");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(nvml_device_from_environment(), "0");
  ::setenv("CUDA_VISIBLE_DEVICES", "3,0,1,2", 1);
  EXPECT_EQ(nvml_device_from_environment(), "3");
  ::setenv("CUDA_VISIBLE_DEVICES", "MIG-1234-abcd", 1);
  EXPECT_EQ(nvml_device_from_environment(), "MIG-1234-abcd");
  ::setenv("RAILYARD_GPU_PCI", "0000:3b:00.0", 1);
  EXPECT_EQ(nvml_device_from_environment(), "0000:3b:00.0");
  ::unsetenv("RAILYARD_GPU_PCI");
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace railyard
