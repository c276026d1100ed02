// adamw_update reads and writes 16-byte vectors: a slice that does not start on a vector's
// boundary is refused on the host, before anything reaches a device, with a message naming the
// operand. No GPU needed: the pointers are never dereferenced.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "adamw_kernels.hpp"
#include "dtype.hpp"

namespace railyard::cuda {
namespace {

// Addresses only, 16-byte aligned unless offset.
template <typename T>
T* at(uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

std::string refusal(float* p, bf16* c, float* m, float* v, const float* g) {
  try {
    adamw_update(p, c, m, v, g, at<const uint32_t>(0x5000), 1000, AdamWStep{}, nullptr);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(AdamWUpdate, RefusesEachOperandOffItsVectorBoundary) {
  float *p = at<float>(0x1000), *m = at<float>(0x2000), *v = at<float>(0x3000);
  const float* g = at<const float>(0x4000);
  bf16* c = at<bf16>(0x6000);
  EXPECT_NE(refusal(at<float>(0x1004), c, m, v, g).find("the weights"), std::string::npos);
  EXPECT_NE(refusal(p, c, at<float>(0x2008), v, g).find("m at"), std::string::npos);
  EXPECT_NE(refusal(p, c, m, at<float>(0x300c), g).find("v at"), std::string::npos);
  EXPECT_NE(refusal(p, c, m, v, at<const float>(0x4004)).find("the gradients"), std::string::npos);
  // bf16: four elements are 8 bytes, so 8 is enough and 2 is not.
  EXPECT_NE(refusal(p, at<bf16>(0x6002), m, v, g).find("the compute copy"), std::string::npos);
  EXPECT_NE(refusal(p, c, m, v, at<const float>(0x4004)).find("16-byte boundary"),
            std::string::npos);
}

TEST(AdamWUpdate, NothingToUpdateIsNotAnError) {
  EXPECT_NO_THROW(adamw_update(at<float>(0x1004), at<bf16>(0x6002), at<float>(0x2000),
                               at<float>(0x3000), at<const float>(0x4000),
                               at<const uint32_t>(0x5000), 0, AdamWStep{}, nullptr));
}

}  // namespace
}  // namespace railyard::cuda
