// GPU names, UUIDs and device minors from the NVIDIA driver's
// /proc/driver/nvidia/gpus/<bus id>/information, for what hwloc does not know.

#include "railyard/nvidia_gpu_info.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace railyard {
namespace {

namespace fs = std::filesystem;

// As driver 580 writes it (tabs and spaces after each colon).
constexpr const char* kH200 =
    "Model: \t\t NVIDIA H200\n"
    "IRQ:   \t\t 44\n"
    "GPU UUID: \t GPU-6f1c2a9e-5b0d-4c3e-9a71-0d2e8f4b1c55\n"
    "Video BIOS: \t 96.00.a5.00.01\n"
    "Bus Type: \t PCIe\n"
    "Bus Location: \t 0000:00:06.0\n"
    "Device Minor: \t 0\n"
    "GPU Excluded:\t No\n";

TEST(NvidiaGpuInfo, ParsesModelAndUuid) {
  const NvidiaGpuInfo info = parse_nvidia_gpu_information(kH200);
  EXPECT_EQ(info.model, "NVIDIA H200");
  EXPECT_EQ(info.uuid, "GPU-6f1c2a9e-5b0d-4c3e-9a71-0d2e8f4b1c55");
}

TEST(NvidiaGpuInfo, DamagedTextLeavesFieldsEmpty) {
  EXPECT_EQ(parse_nvidia_gpu_information("").model, "");
  EXPECT_EQ(parse_nvidia_gpu_information("Model NVIDIA H200\n").model, "");  // no colon
  EXPECT_EQ(parse_nvidia_gpu_information("Model: \t \n").model, "");
  EXPECT_EQ(parse_nvidia_gpu_information("Model: NVIDIA\x01H200\n").model, "");
  EXPECT_EQ(parse_nvidia_gpu_information("Model: " + std::string(129, 'x') + "\n").model, "");
  EXPECT_EQ(parse_nvidia_gpu_information("Model: " + std::string(128, 'x')).model,
            std::string(128, 'x'));
  // A truncated file still yields what it has.
  EXPECT_EQ(parse_nvidia_gpu_information("Model: NVIDIA H200\nGPU UU").uuid, "");
  EXPECT_EQ(parse_nvidia_gpu_information("Model: NVIDIA H200\nGPU UU").model, "NVIDIA H200");
}

TEST(NvidiaGpuInfo, ParsesTheDeviceMinor) {
  EXPECT_EQ(parse_nvidia_gpu_information(kH200).minor, 0);
  EXPECT_EQ(parse_nvidia_gpu_information("Device Minor: \t 7\n").minor, 7);
  EXPECT_EQ(parse_nvidia_gpu_information("Device Minor:\t253\r\n").minor, kMaxGpuMinor);
  // A file cut after the number still has it.
  EXPECT_EQ(parse_nvidia_gpu_information("Model: X\nDevice Minor: \t 3").minor, 3);
}

// Missing, garbage, out-of-range and repeated minors are unknown (-1), never a guess.
TEST(NvidiaGpuInfo, DamagedDeviceMinorIsUnknown) {
  for (const char* text : {"",
                           "Model: NVIDIA H200\n",
                           "Device Minor:\n",
                           "Device Minor: \t x\n",
                           "Device Minor: -1\n",
                           "Device Minor: +1\n",
                           "Device Minor: 0x3\n",
                           "Device Minor: 1 2\n",
                           "Device Minor: 3.0\n",
                           "Device Minor: 254\n",
                           "Device Minor: 255\n",
                           "Device Minor: 4294967297\n",
                           "Device Minor: 1000\n",
                           "Device Minor: \x01"
                           "3\n",
                           "Device Minor: \xd9\xa3\n",
                           "Device Minor 3\n",
                           "Device Min",
                           "Device Minor: 1\nDevice Minor: 1\n",
                           "Device Minor: 1\nDevice Minor: 2\n",
                           "Device Minor: 1\nDevice Minor: junk\n"}) {
    EXPECT_EQ(parse_nvidia_gpu_information(text).minor, -1) << text;
  }
}

// Every truncation of a real file parses without harm: a field is what the file has, or empty.
TEST(NvidiaGpuInfo, TruncatedFilesParseToPrefixesOrNothing) {
  const std::string full = kH200;
  for (size_t n = 0; n <= full.size(); ++n) {
    const NvidiaGpuInfo info = parse_nvidia_gpu_information(full.substr(0, n));
    EXPECT_TRUE(info.minor == -1 || info.minor == 0) << n;
    EXPECT_TRUE(info.model.empty() || std::string("NVIDIA H200").starts_with(info.model)) << n;
    EXPECT_TRUE(info.uuid.empty() ||
                std::string("GPU-6f1c2a9e-5b0d-4c3e-9a71-0d2e8f4b1c55").starts_with(info.uuid))
        << n;
  }
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise += static_cast<char>((i * 131 + 7) % 256);
  EXPECT_EQ(parse_nvidia_gpu_information(noise).minor, -1);
}

class DriverDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("railyard-nvidia-gpus-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& bus_id, const std::string& text) {
    fs::create_directories(dir_ / bus_id);
    std::ofstream(dir_ / bus_id / "information") << text;
  }
  fs::path dir_;
};

Topology two_gpus() {
  Topology t;
  t.gpus.resize(2);
  t.gpus[0].pci_bus_id = "0000:00:06.0";
  t.gpus[1].pci_bus_id = "0000:00:07.0";
  return t;
}

TEST_F(DriverDir, FillsWhatHwlocLacks) {
  write("0000:00:06.0", kH200);
  Topology t = two_gpus();
  t.gpus[1].name = "NVIDIA H100 80GB HBM3";  // from hwloc: kept
  write("0000:00:07.0", "Model: \t something else\nGPU UUID: \t GPU-aa\n");
  add_nvidia_driver_info(t, dir_);
  EXPECT_EQ(t.gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(t.gpus[0].uuid, "GPU-6f1c2a9e-5b0d-4c3e-9a71-0d2e8f4b1c55");
  EXPECT_EQ(t.gpus[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(t.gpus[1].uuid, "GPU-aa");
}

TEST_F(DriverDir, MissingFilesAndOddUuidsChangeNothing) {
  write("0000:00:06.0", "Model: \t NVIDIA H200\nGPU UUID: \t not-a-uuid\n");
  Topology t = two_gpus();
  add_nvidia_driver_info(t, dir_);
  EXPECT_EQ(t.gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(t.gpus[0].uuid, "");
  EXPECT_EQ(t.gpus[1].name, "");
  add_nvidia_driver_info(t, dir_ / "absent");
  EXPECT_EQ(t.gpus[1].name, "");
}

// GPUs that hwloc named fully still get their minor; a known minor is kept.
TEST_F(DriverDir, AddsMinorsEvenToNamedGpus) {
  write("0000:00:06.0", kH200);
  write("0000:00:07.0", "Device Minor: \t 1\n");
  Topology t = two_gpus();
  t.gpus[0].name = "NVIDIA H200";
  t.gpus[0].uuid = "GPU-6f1c2a9e-5b0d-4c3e-9a71-0d2e8f4b1c55";
  t.gpus[1].minor = 5;
  add_nvidia_driver_info(t, dir_);
  EXPECT_EQ(t.gpus[0].minor, 0);
  EXPECT_EQ(t.gpus[1].minor, 5);
}

// A file far over the read limit is cut there: a minor past the cut is unknown, not a crash.
TEST_F(DriverDir, OversizedFilesAreCut) {
  write("0000:00:06.0", std::string(70 * 1024, 'x') + "\nDevice Minor: \t 0\n");
  write("0000:00:07.0", "Device Minor: \t 1\n" + std::string(70 * 1024, '\n'));
  Topology t = two_gpus();
  add_nvidia_driver_info(t, dir_);
  EXPECT_EQ(t.gpus[0].minor, -1);
  EXPECT_EQ(t.gpus[1].minor, 1);
}

}  // namespace
}  // namespace railyard
