// Slurm's GPU index -> GPU: PCI bus order, or device minor order where the admin says gres.conf
// numbers GPUs by /dev/nvidiaN and every minor is known and distinct.

#include "railyard/gpu_numbering.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace railyard {
namespace {

// Four GPUs in PCI bus order with the given minors (-1: unknown).
Topology four_gpus(std::vector<int> minors) {
  Topology t;
  t.source = "live";
  for (int i = 0; i < 4; ++i) {
    Gpu g;
    g.pci_bus_id = "0000:" + std::to_string(i + 1) + "1:00.0";
    g.minor = minors[i];
    t.gpus.push_back(g);
  }
  return t;
}

const std::vector<int> kPciOrder = {0, 1, 2, 3};

TEST(GpuNumbering, MinorsInPciOrderChangeNothing) {
  for (std::optional<GpuIndex> wanted : {std::optional<GpuIndex>(), std::optional(GpuIndex::kPci),
                                         std::optional(GpuIndex::kMinor)}) {
    const GpuNumbering n = number_gpus(four_gpus({0, 1, 2, 3}), wanted);
    EXPECT_EQ(n.gpus, kPciOrder);
    EXPECT_FALSE(n.minors_out_of_pci_order);
    EXPECT_TRUE(n.warnings.empty());
    EXPECT_EQ(n.rule, wanted.value_or(GpuIndex::kPci));
  }
}

TEST(GpuNumbering, ReversedMinorsFollowTheStatedRule) {
  const Topology t = four_gpus({3, 2, 1, 0});
  const GpuNumbering minor = number_gpus(t, GpuIndex::kMinor);
  EXPECT_EQ(minor.rule, GpuIndex::kMinor);
  EXPECT_EQ(minor.gpus, (std::vector<int>{3, 2, 1, 0}));  // index 0 is /dev/nvidia0
  EXPECT_TRUE(minor.minors_out_of_pci_order);
  EXPECT_TRUE(minor.warnings.empty());

  const GpuNumbering pci = number_gpus(t, GpuIndex::kPci);
  EXPECT_EQ(pci.rule, GpuIndex::kPci);
  EXPECT_EQ(pci.gpus, kPciOrder);
  EXPECT_TRUE(pci.minors_out_of_pci_order);
  EXPECT_TRUE(pci.warnings.empty());
}

// Not stated: PCI bus order, and one warning showing both orders and what to set.
TEST(GpuNumbering, UnstatedRuleWarnsOnceWhenTheOrdersDiffer) {
  const GpuNumbering n = number_gpus(four_gpus({1, 0, 2, 3}), std::nullopt);
  EXPECT_EQ(n.rule, GpuIndex::kPci);
  EXPECT_EQ(n.gpus, kPciOrder);
  ASSERT_EQ(n.warnings.size(), 1u);
  const std::string& w = n.warnings[0];
  EXPECT_NE(w.find("not in PCI bus order (/dev/nvidia0=0000:21:00.0, "
                   "/dev/nvidia1=0000:11:00.0, /dev/nvidia2=0000:31:00.0"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("gpu_index=pci or gpu_index=minor"), std::string::npos) << w;
}

// Gaps (a GPU the driver excludes) keep the order: File=/dev/nvidia[0,2,5,7] lists them so.
TEST(GpuNumbering, MinorsWithGapsAreRanked) {
  const GpuNumbering n = number_gpus(four_gpus({7, 0, 5, 2}), GpuIndex::kMinor);
  EXPECT_EQ(n.gpus, (std::vector<int>{1, 3, 2, 0}));
}

TEST(GpuNumbering, UnusableMinorsFallBackToPciOrderWithAWarning) {
  struct Case {
    std::vector<int> minors;
    const char* says;
  };
  for (const Case& c : {Case{{0, 1, -1, 3}, "GPU 0000:31:00.0 has no known device minor"},
                        Case{{-1, -1, -1, -1}, "GPU 0000:11:00.0 has no known device minor"},
                        Case{{2, 1, 2, 0},
                             "GPUs 0000:11:00.0 and 0000:31:00.0 both report "
                             "device minor 2"}}) {
    const GpuNumbering n = number_gpus(four_gpus(c.minors), GpuIndex::kMinor);
    EXPECT_EQ(n.rule, GpuIndex::kPci);
    EXPECT_EQ(n.gpus, kPciOrder);
    EXPECT_FALSE(n.minors_out_of_pci_order);
    ASSERT_EQ(n.warnings.size(), 1u);
    EXPECT_NE(n.warnings[0].find(c.says), std::string::npos) << n.warnings[0];
    EXPECT_NE(n.warnings[0].find("read in PCI bus order instead"), std::string::npos);
    // Without gpu_index=minor unknown minors are normal (no driver data): no warning.
    EXPECT_TRUE(number_gpus(four_gpus(c.minors), std::nullopt).warnings.empty());
  }
}

TEST(GpuNumbering, NoGpusNoWarnings) {
  const GpuNumbering n = number_gpus(Topology{}, GpuIndex::kMinor);
  EXPECT_TRUE(n.gpus.empty());
  EXPECT_TRUE(n.warnings.empty());
}

}  // namespace
}  // namespace railyard
