// Attribute values as the reader's messages and railyard-ckpt inspect print them.
#include "railyard/checkpoint_schema.hpp"

#include <gtest/gtest.h>

using namespace railyard;

TEST(CheckpointSchema, AttributeTextIsExactAndShort) {
  EXPECT_EQ(attribute_text(int64_t{-42}), "-42");
  EXPECT_EQ(attribute_text(int64_t{1} << 40), "1099511627776");
  EXPECT_EQ(attribute_text(0.1), "0.1");     // the shortest text that reads back as the same double
  EXPECT_EQ(attribute_text(3e-4), "3e-04");  // or fixed notation, whichever is shorter
  EXPECT_EQ(attribute_text(1e300), "1e+300");
  EXPECT_EQ(attribute_text(std::string("gelu")), "gelu");
}
