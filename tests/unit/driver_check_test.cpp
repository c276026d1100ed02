#include "railyard/driver_check.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace railyard {
namespace {

DriverVersion dv(int a, int b, int c) {
  return DriverVersion{a, b, c};
}

TEST(CudaVersion, ParsesMajorMinorAndMajorOnly) {
  EXPECT_EQ(CudaVersion::parse("12.4"), (CudaVersion{12, 4}));
  EXPECT_EQ(CudaVersion::parse("12"), (CudaVersion{12, 0}));
  EXPECT_EQ(CudaVersion::parse("11.8").str(), "11.8");
  EXPECT_LT(CudaVersion::parse("12.2"), CudaVersion::parse("12.10"));
}

TEST(CudaVersion, RejectsMalformed) {
  for (const char* bad : {"", "12.", ".4", "12.4.1", "a.b", "12,4", "-1", "0.9", "1234567.1"}) {
    EXPECT_THROW(CudaVersion::parse(bad), std::invalid_argument) << bad;
  }
  try {
    CudaVersion::parse("twelve");
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'twelve'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("MAJOR.MINOR"), std::string::npos);
  }
}

TEST(DriverVersion, ParsesTwoOrThreeFields) {
  EXPECT_EQ(parse_driver_version("525.85.12"), dv(525, 85, 12));
  EXPECT_EQ(parse_driver_version("570.26"), dv(570, 26, 0));
  for (const char* bad : {"", "525", "525.85.12.1", "525..12", "v525.85", "525.85 "}) {
    EXPECT_THROW(parse_driver_version(bad), std::invalid_argument) << bad;
  }
}

TEST(MaxCuda, FollowsTheReleaseNotesTable) {
  // The minimum driver of a toolkit is exactly where it becomes supported.
  EXPECT_EQ(max_cuda_for_driver(dv(525, 60, 13)), (CudaVersion{12, 0}));
  EXPECT_EQ(max_cuda_for_driver(dv(525, 60, 12)), (CudaVersion{11, 8}));
  EXPECT_EQ(max_cuda_for_driver(dv(525, 85, 12)), (CudaVersion{12, 0}));
  EXPECT_EQ(max_cuda_for_driver(dv(530, 30, 2)), (CudaVersion{12, 1}));
  EXPECT_EQ(max_cuda_for_driver(dv(535, 104, 5)), (CudaVersion{12, 2}));
  EXPECT_EQ(max_cuda_for_driver(dv(545, 23, 8)), (CudaVersion{12, 3}));
  EXPECT_EQ(max_cuda_for_driver(dv(550, 54, 14)), (CudaVersion{12, 4}));
  EXPECT_EQ(max_cuda_for_driver(dv(555, 42, 6)), (CudaVersion{12, 5}));
  EXPECT_EQ(max_cuda_for_driver(dv(565, 57, 1)), (CudaVersion{12, 6}));
  EXPECT_EQ(max_cuda_for_driver(dv(570, 124, 6)), (CudaVersion{12, 8}));
  EXPECT_EQ(max_cuda_for_driver(dv(575, 57, 8)), (CudaVersion{12, 9}));
  EXPECT_EQ(max_cuda_for_driver(dv(580, 65, 6)), (CudaVersion{13, 0}));
  EXPECT_EQ(max_cuda_for_driver(dv(470, 82, 1)), (CudaVersion{11, 4}));
  EXPECT_EQ(max_cuda_for_driver(dv(450, 51, 5)), (CudaVersion{11, 0}));
  EXPECT_EQ(max_cuda_for_driver(dv(418, 39, 0)), (CudaVersion{10, 1}));
  EXPECT_EQ(max_cuda_for_driver(dv(346, 46, 0)), (CudaVersion{7, 0}));
  EXPECT_FALSE(max_cuda_for_driver(dv(340, 0, 0)));
}

constexpr const char* kProprietary =
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  525.85.12  Sat Jan 28 02:10:06 UTC 2023\n"
    "GCC version:  gcc version 11.3.0 (Ubuntu 11.3.0-1ubuntu1~22.04)\n";
constexpr const char* kOpen =
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Tue Aug 22 21:38:53 UTC 2023\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";

TEST(ProcVersion, FindsTheVersionInBothModuleFlavours) {
  EXPECT_EQ(parse_proc_driver_version(kProprietary), "525.85.12");
  EXPECT_EQ(parse_proc_driver_version(kOpen), "535.104.05");
  EXPECT_FALSE(parse_proc_driver_version("GCC version: 12.2.0\n"));
  EXPECT_FALSE(parse_proc_driver_version("NVRM version: no number here\n"));
  EXPECT_FALSE(parse_proc_driver_version(""));
}

std::string write_file(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/" + name + "-" + std::to_string(::getpid());
  std::ofstream(path) << content;
  return path;
}

TEST(ReadProcDriver, ReadsTheFileItIsGiven) {
  const auto info = read_proc_driver(write_file("railyard-driver-525", kProprietary));
  ASSERT_TRUE(info);
  EXPECT_EQ(info->version, "525.85.12");
  EXPECT_EQ(info->max_cuda, (CudaVersion{12, 0}));
  EXPECT_NE(info->source.find("railyard-driver-525"), std::string::npos);
}

TEST(ReadProcDriver, AbsentFileMeansNoDriver) {
  EXPECT_FALSE(read_proc_driver(::testing::TempDir() + "/railyard-no-such-version-file"));
}

TEST(ReadProcDriver, UnreadableContentIsAnError) {
  EXPECT_THROW(read_proc_driver(write_file("railyard-driver-garbage", "hello\n")),
               std::runtime_error);
}

TEST(CheckDriver, PassesWhenNewEnough) {
  const DriverInfo driver{"550.54.14", {12, 4}, "NVML"};
  EXPECT_NO_THROW(check_driver("gpu07", driver, {12, 4}));
  EXPECT_NO_THROW(check_driver("gpu07", driver, {11, 8}));
}

TEST(CheckDriver, NamesNodeDriverAndBothVersions) {
  const DriverInfo driver{"525.85.12", {12, 0}, "/proc/driver/nvidia/version"};
  try {
    check_driver("gpu07", driver, {12, 4});
    FAIL() << "expected DriverCheckError";
  } catch (const DriverCheckError& e) {
    EXPECT_EQ(std::string(e.what()),
              "node gpu07 driver 525.85.12 supports CUDA <= 12.0; this job needs 12.4");
  }
}

TEST(CheckDriver, NoDriverIsAClearError) {
  try {
    check_driver("node1", std::nullopt, {12, 4});
    FAIL() << "expected DriverCheckError";
  } catch (const DriverCheckError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("node node1 has no NVIDIA driver"), std::string::npos) << what;
    EXPECT_NE(what.find("needs CUDA 12.4"), std::string::npos) << what;
  }
}

TEST(ReadDriver, FallsBackToTheGivenFileWithoutNvml) {
  // This machine has no libnvidia-ml; where one exists, NVML answers first and this test only
  // checks that some driver was found.
  const auto info = read_driver(write_file("railyard-driver-550", kOpen));
  ASSERT_TRUE(info);
  if (info->source != "NVML") {
    EXPECT_EQ(info->version, "535.104.05");
    EXPECT_EQ(info->max_cuda, (CudaVersion{12, 2}));
  }
}

}  // namespace
}  // namespace railyard
