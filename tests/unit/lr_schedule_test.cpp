// The learning-rate schedule: warmup, cosine, floor, and its validation.

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <stdexcept>

#include "railyard/lr_schedule.hpp"

namespace railyard {
namespace {

TEST(LrSchedule, WarmupCosineFloor) {
  LrSchedule s;
  s.lr = 1e-3;
  s.warmup = 10;
  s.total = 110;
  s.min_ratio = 0.1;
  s.validate();
  EXPECT_DOUBLE_EQ(s.at(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);                   // peak at the end of warmup
  EXPECT_NEAR(s.at(60), 1e-4 + 0.9e-3 * 0.5, 1e-15);  // half way: the middle of the range
  EXPECT_NEAR(s.at(35), 1e-4 + 0.9e-3 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)), 1e-15);
  EXPECT_DOUBLE_EQ(s.at(110), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(5000), 1e-4);
  for (int64_t i = 10; i < 110; ++i) EXPECT_GE(s.at(i), s.at(i + 1)) << i;
}

TEST(LrSchedule, NoWarmupStartsAtPeak) {
  LrSchedule s;
  s.lr = 2.0;
  s.warmup = 0;
  s.total = 4;
  s.min_ratio = 0.0;
  EXPECT_DOUBLE_EQ(s.at(0), 2.0);
  EXPECT_NEAR(s.at(2), 1.0, 1e-15);
  EXPECT_DOUBLE_EQ(s.at(4), 0.0);
}

TEST(LrSchedule, WarmupLongerThanTheRun) {
  LrSchedule s;
  s.lr = 1.0;
  s.warmup = 100;
  s.total = 10;
  EXPECT_DOUBLE_EQ(s.at(9), 0.1);  // still warming up when the run ends
}

TEST(LrSchedule, ValidateNamesTheField) {
  auto msg = [](LrSchedule s) {
    try {
      s.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  LrSchedule s;
  EXPECT_EQ(msg(s), "");
  s.lr = 0;
  EXPECT_NE(msg(s).find("lr"), std::string::npos);
  s.lr = NAN;
  EXPECT_NE(msg(s).find("lr"), std::string::npos);
  s = LrSchedule{};
  s.warmup = -1;
  EXPECT_NE(msg(s).find("warmup"), std::string::npos);
  s = LrSchedule{};
  s.total = 0;
  EXPECT_NE(msg(s).find("total"), std::string::npos);
  s = LrSchedule{};
  s.min_ratio = 1.5;
  EXPECT_NE(msg(s).find("min_ratio"), std::string::npos);
}

}  // namespace
}  // namespace railyard
