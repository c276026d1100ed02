#include "railyard/memory_alert.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace railyard {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

TEST(MemoryAlert, WarnsOnceWhenCrossingAndRearmsBelowTheHysteresis) {
  std::vector<std::string> lines;
  MemoryAlert alert(0.9, [&](const std::string& l) { lines.push_back(l); });
  EXPECT_FALSE(alert.update(50 * kGiB, 100 * kGiB, 1, "GPU 0"));
  EXPECT_TRUE(alert.update(91 * kGiB, 100 * kGiB, 2, "GPU 0"));
  EXPECT_TRUE(alert.update(95 * kGiB, 100 * kGiB, 3, "GPU 0"));
  EXPECT_TRUE(alert.update(88 * kGiB, 100 * kGiB, 4, "GPU 0"));  // above 95% of the line: still on
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(alert.crossings(), 1);
  EXPECT_NE(lines[0].find("GPU 0 memory 91.0% used"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("at step 2"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("--mem-alert 90.0%"), std::string::npos) << lines[0];
  EXPECT_FALSE(alert.update(80 * kGiB, 100 * kGiB, 5, "GPU 0"));
  EXPECT_TRUE(alert.update(90 * kGiB, 100 * kGiB, 6, "GPU 0"));
  EXPECT_EQ(lines.size(), 2u);
  EXPECT_EQ(alert.crossings(), 2);
}

TEST(MemoryAlert, LowThresholdFiresAndUnknownTotalIsIgnored) {
  int warnings = 0;
  MemoryAlert alert(0.01, [&](const std::string&) { ++warnings; });
  EXPECT_FALSE(alert.update(5, 0, 1, "GPU 0"));
  EXPECT_TRUE(alert.update(2 * kGiB, 100 * kGiB, 2, "host"));
  EXPECT_EQ(warnings, 1);
}

TEST(MemoryAlert, AdvisesRecomputeOnlyWhereTheRunCanUseIt) {
  std::vector<std::string> lines;
  const auto keep = [&](const std::string& l) { lines.push_back(l); };
  MemoryAlert gpu(0.5, keep, /*recompute_possible=*/true);
  gpu.update(6, 10, 1, "GPU 0");
  MemoryAlert gpu_recompute_on(0.5, keep, /*recompute_possible=*/false);
  gpu_recompute_on.update(6, 10, 1, "GPU 0");
  MemoryAlert host(0.5, keep, /*recompute_possible=*/true);  // the CPU engine: host memory
  host.update(6, 10, 1, "host");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("--grad-accum, or --recompute"), std::string::npos) << lines[0];
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(lines[i].find("--recompute"), std::string::npos) << lines[i];
    EXPECT_NE(lines[i].find("a smaller --batch with more --grad-accum"), std::string::npos);
  }
}

TEST(MemoryAlert, RejectsFractionsOutsideZeroToOne) {
  for (double bad : {0.0, -0.5, 1.5}) {
    try {
      MemoryAlert alert(bad, nullptr);
      FAIL() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--mem-alert"), std::string::npos) << e.what();
    }
  }
  EXPECT_NO_THROW(MemoryAlert(1.0, nullptr));
}

TEST(OutOfMemory, SaysWhatWasAllocatedAndSuggestsHalfTheBatch) {
  OutOfMemoryContext c;
  c.what = "attention scores of layer 7";
  c.requested_bytes = 3 * kGiB / 2;
  c.free_bytes = 512ull << 20;
  c.total_bytes = 141 * kGiB;
  c.batch = 16;
  c.grad_accum = 2;
  const std::string m = describe_out_of_memory(c);
  EXPECT_NE(m.find("allocating 1.50 GiB for attention scores of layer 7"), std::string::npos) << m;
  EXPECT_NE(m.find("512.0 MiB free of 141.0 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("--batch 8 --grad-accum 4"), std::string::npos) << m;
  EXPECT_NE(m.find("--recompute"), std::string::npos) << m;
}

TEST(OutOfMemory, WithoutKnownSizesOrWithRecomputeOnStillSuggestsWhatIsLeft) {
  OutOfMemoryContext c;
  c.requested_bytes = 100;
  c.batch = 1;
  c.recompute = true;
  const std::string m = describe_out_of_memory(c);
  EXPECT_NE(m.find("100 B for an unnamed buffer"), std::string::npos) << m;
  EXPECT_EQ(m.find("free of"), std::string::npos) << m;
  EXPECT_NE(m.find("--grad-accum"), std::string::npos) << m;
  EXPECT_EQ(m.find("--recompute"), std::string::npos) << m;
}

TEST(FormatBytes, PicksTheUnit) {
  EXPECT_EQ(format_bytes(17), "17 B");
  EXPECT_EQ(format_bytes(1024), "1.00 KiB");
  EXPECT_EQ(format_bytes(512ull << 20), "512.0 MiB");
  EXPECT_EQ(format_bytes(3ull << 29), "1.50 GiB");
}

}  // namespace
}  // namespace railyard
