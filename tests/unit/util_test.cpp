// The util layer's helpers: one meaning each, shared by the plugin and the runtime.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "railyard/env.hpp"
#include "railyard/iso_time.hpp"
#include "railyard/splitmix64.hpp"
#include "railyard/strings.hpp"

namespace railyard {
namespace {

using Fields = std::vector<std::string>;

TEST(Split, KeepsEveryFieldSoNSeparatorsGiveNPlusOne) {
  EXPECT_EQ(split("a,,b", ','), (Fields{"a", "", "b"}));
  EXPECT_EQ(split("a,", ','), (Fields{"a", ""}));
  EXPECT_EQ(split(",a", ','), (Fields{"", "a"}));
  EXPECT_EQ(split("", ','), (Fields{""}));
  EXPECT_EQ(split("0-3;8", ';'), (Fields{"0-3", "8"}));
  EXPECT_EQ(split("a,b", ';'), (Fields{"a,b"}));
}

TEST(Join, PutsTheSeparatorBetweenParts) {
  EXPECT_EQ(join({"a", "b", "c"}, ","), "a,b,c");
  EXPECT_EQ(join({"a"}, ", "), "a");
  EXPECT_EQ(join({}, ","), "");
  EXPECT_EQ(join(split("a,,b", ','), ","), "a,,b");
}

TEST(AllDigits, OnlyNonEmptyAsciiDigits) {
  EXPECT_TRUE(all_digits("0"));
  EXPECT_TRUE(all_digits("007"));
  for (const char* no : {"", "+1", "-1", "1.0", " 1", "1 ", "1e3", "x"}) {
    EXPECT_FALSE(all_digits(no)) << "'" << no << "'";
  }
}

TEST(IsoTime, IsUtcToTheSecond) {
  EXPECT_EQ(iso_time(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(iso_time(1700000000.9), "2023-11-14T22:13:20Z");
}

TEST(Env, EmptyCountsAsUnset) {
  ::setenv("RAILYARD_UTIL_TEST", "value", 1);
  EXPECT_EQ(env_value("RAILYARD_UTIL_TEST"), "value");
  EXPECT_EQ(env_or("RAILYARD_UTIL_TEST", "fallback"), "value");
  ::setenv("RAILYARD_UTIL_TEST", "", 1);
  EXPECT_FALSE(env_value("RAILYARD_UTIL_TEST"));
  EXPECT_EQ(env_or("RAILYARD_UTIL_TEST", "fallback"), "fallback");
  ::unsetenv("RAILYARD_UTIL_TEST");
  EXPECT_FALSE(env_value("RAILYARD_UTIL_TEST"));
}

TEST(Splitmix64, MatchesTheReferenceStream) {
  // SplitMix64 seeded with 0: the published first outputs.
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(splitmix64_next(state), 0x6e789e6aa1b965f4ULL);
  // The counter form gives element i without the elements before it.
  EXPECT_EQ(splitmix64(kSplitmix64Gamma), 0x6e789e6aa1b965f4ULL);
}

}  // namespace
}  // namespace railyard
