// assign_zeroed: the checkpoint reader's destination arrays, sized and zeroed with their pages
// faulted in ahead (in parallel where the kernel offers it).

#include "../../runtime/ckpt/zeroed_arrays.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace {

bool all_zero(const std::vector<float>& a) {
  return std::all_of(a.begin(), a.end(), [](float x) { return x == 0.0f; });
}

TEST(ZeroedArrays, OldContentsAndSizesGiveWayToNZeros) {
  std::vector<float> a(10, 7.0f), b(3'000'000, -1.0f), c;
  railyard::assign_zeroed({&a, &b, &c}, 2'500'000);  // 10 MB each: several 4 KiB pages, one piece
  for (const std::vector<float>* v : {&a, &b, &c}) {
    ASSERT_EQ(v->size(), 2'500'000u);
    EXPECT_TRUE(all_zero(*v));
  }
}

TEST(ZeroedArrays, ManyPiecesAndEmptyArrays) {
  std::vector<float> a(5, 1.0f), b(5, 1.0f);
  railyard::assign_zeroed({&a, &b}, size_t{40} << 20);  // 160 MiB each: three 64 MiB pieces
  EXPECT_EQ(a.size(), size_t{40} << 20);
  EXPECT_TRUE(all_zero(a) && all_zero(b));
  railyard::assign_zeroed({&a, &b}, 0);
  EXPECT_TRUE(a.empty() && b.empty());
  railyard::assign_zeroed({}, 100);  // nothing to size
}

}  // namespace
