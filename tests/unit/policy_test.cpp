// Policy value parsers (messages name the value and what is allowed), the NIC filter and the
// RAILYARD_POLICY description.

#include "railyard/policy.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace railyard {
namespace {

template <typename F>
std::string error_of(F parse) {
  try {
    parse();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}

TEST(Policy, GpuChoice) {
  EXPECT_EQ(parse_gpu_choice("closest"), GpuChoice::kClosest);
  EXPECT_EQ(parse_gpu_choice("RANK"), GpuChoice::kRank);
  const std::string e = error_of([] { parse_gpu_choice("nearest"); });
  EXPECT_NE(e.find("'nearest'"), std::string::npos) << e;
  EXPECT_NE(e.find("closest, rank"), std::string::npos) << e;
}

TEST(Policy, VisibleDevices) {
  EXPECT_EQ(parse_visible_devices("rotate"), VisibleDevices::kRotate);
  EXPECT_EQ(parse_visible_devices("isolate"), VisibleDevices::kIsolate);
  EXPECT_EQ(parse_visible_devices("all"), VisibleDevices::kAll);
  const std::string e = error_of([] { parse_visible_devices("hide"); });
  EXPECT_NE(e.find("'hide'"), std::string::npos) << e;
  EXPECT_NE(e.find("rotate, isolate, all"), std::string::npos) << e;
}

TEST(Policy, Switch) {
  for (const char* on : {"on", "yes", "TRUE", "1"}) EXPECT_TRUE(parse_switch(on)) << on;
  for (const char* off : {"off", "No", "false", "0"}) EXPECT_FALSE(parse_switch(off)) << off;
  EXPECT_NE(error_of([] { parse_switch("maybe"); }).find("'maybe'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_switch(""); }).find("on, off"), std::string::npos);
}

TEST(Policy, NicPatterns) {
  EXPECT_EQ(parse_nic_patterns("mlx5_*,bnxt_re[0-3]"),
            (std::vector<std::string>{"mlx5_*", "bnxt_re[0-3]"}));
  EXPECT_NE(error_of([] { parse_nic_patterns("mlx5_0,,mlx5_1"); }).find("NIC pattern"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_nic_patterns("mlx5_0;reboot"); }).find("'mlx5_0;reboot'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_nic_patterns("../../etc"); }).find("'../../etc'"),
            std::string::npos);
}

TEST(Policy, SocketIfname) {
  EXPECT_EQ(parse_socket_ifname("ib0"), "ib0");
  EXPECT_EQ(parse_socket_ifname("^docker,lo"), "^docker,lo");
  EXPECT_EQ(parse_socket_ifname("=eth0"), "=eth0");
  EXPECT_NE(error_of([] {
              parse_socket_ifname("averyveryverylongname0");
            }).find("'averyveryverylongname0'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_socket_ifname("eth0 eth1"); }).find("'eth0 eth1'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_socket_ifname(""); }).find("socket interface"), std::string::npos);
  EXPECT_NE(error_of([] { parse_socket_ifname("^"); }).find("'^'"), std::string::npos);
}

TEST(Policy, GdrLevel) {
  EXPECT_EQ(parse_gdr_level("auto"), "");
  EXPECT_EQ(parse_gdr_level("pxb"), "PXB");
  EXPECT_EQ(parse_gdr_level("SYS"), "SYS");
  const std::string e = error_of([] { parse_gdr_level("NODE"); });
  EXPECT_NE(e.find("'NODE'"), std::string::npos) << e;
  EXPECT_NE(e.find("LOC, PIX, PXB, PHB, SYS"), std::string::npos) << e;
}

TEST(Policy, CudaVersion) {
  EXPECT_EQ(parse_cuda_version("12"), "12.0");
  EXPECT_EQ(parse_cuda_version("12.4"), "12.4");
  EXPECT_EQ(parse_cuda_version("11.08"), "11.8");
  for (const char* bad : {"", "12.", ".4", "12.4.1", "v12", "12.x", "1234"}) {
    const std::string e = error_of([bad] { parse_cuda_version(bad); });
    EXPECT_NE(e.find("'" + std::string(bad) + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("MAJOR.MINOR"), std::string::npos) << e;
  }
}

TEST(Policy, NicFilter) {
  Policy p;
  EXPECT_TRUE(nic_allowed(p, "mlx5_0"));
  p.nic_include = {"mlx5_*"};
  EXPECT_TRUE(nic_allowed(p, "mlx5_3"));
  EXPECT_FALSE(nic_allowed(p, "bnxt_re0"));
  p.nic_exclude = {"mlx5_[4-7]"};
  EXPECT_TRUE(nic_allowed(p, "mlx5_3"));
  EXPECT_FALSE(nic_allowed(p, "mlx5_5"));
  p.nic_include.clear();
  EXPECT_TRUE(nic_allowed(p, "bnxt_re0"));
}

TEST(Policy, Describe) {
  Policy p;
  EXPECT_EQ(describe(p), "gpu=closest,visible=rotate,cpu=on,net=on");
  p.gpu_choice = GpuChoice::kRank;
  p.visible_devices = VisibleDevices::kIsolate;
  p.cpu_bind = false;
  p.net_env = false;
  p.gdr_level = "PIX";
  EXPECT_EQ(describe(p), "gpu=rank,visible=isolate,cpu=off,net=off,gdr=PIX");
  EXPECT_EQ(to_string(VisibleDevices::kAll), "all");
}

}  // namespace
}  // namespace railyard
