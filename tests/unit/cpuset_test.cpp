// CpuSet: list strings in and out, set algebra, and rejection of malformed lists.

#include "railyard/cpuset.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace railyard {
namespace {

TEST(CpuSet, ParsesAndPrintsLists) {
  EXPECT_EQ(CpuSet::parse("0-3,8,10-11").to_string(), "0-3,8,10-11");
  EXPECT_EQ(CpuSet::parse("3,2,1,0").to_string(), "0-3");
  EXPECT_EQ(CpuSet::parse("0-3,8").count(), 5);
  EXPECT_TRUE(CpuSet::parse("").empty());
  EXPECT_EQ(CpuSet().to_string(), "");
  EXPECT_EQ(CpuSet::parse("5,1-2").members(), (std::vector<int>{1, 2, 5}));
  EXPECT_TRUE(CpuSet().members().empty());
}

TEST(CpuSet, Algebra) {
  const CpuSet a = CpuSet::parse("0-7");
  const CpuSet b = CpuSet::parse("4-11");
  EXPECT_EQ((a & b).to_string(), "4-7");
  EXPECT_EQ((a | b).to_string(), "0-11");
  EXPECT_TRUE(a.contains(CpuSet::parse("1-2")));
  EXPECT_FALSE(a.contains(b));
  EXPECT_TRUE((a & CpuSet::parse("16")).empty());
  CpuSet c = a;
  c = b;
  EXPECT_EQ(c, b);
  EXPECT_EQ(a.to_string(), "0-7");
}

TEST(CpuSet, RejectsMalformedLists) {
  for (const char* bad : {"0-", "-3", "a", "0,,1", "0-3x", "1 2", ",0", "5-1", "0-4294967296",
                          "4294967297", "70000", "0,9-2"}) {
    try {
      CpuSet::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos);
    }
  }
}

TEST(CpuSet, ErrorsSayWhatIsWrongWithTheValue) {
  auto message = [](const char* list) {
    try {
      CpuSet::parse(list);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("5-1").find("range 5-1 is reversed"), std::string::npos) << message("5-1");
  EXPECT_NE(message("0-4294967296").find("cpu 4294967296 is beyond"), std::string::npos);
}

}  // namespace
}  // namespace railyard
