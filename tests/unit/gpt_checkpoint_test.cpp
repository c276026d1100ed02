// The GPT's bridge to the checkpoints: its config as attributes in kGptConfigFields order, and
// back, refusing attributes that describe no valid GPT with the attribute named.
#include "railyard/gpt_checkpoint.hpp"

#include <gtest/gtest.h>

#include <string>

#include "checkpoint_test_util.hpp"

using namespace railyard;

namespace {

GptConfig tiny() {
  return ckpt_test::tiny_model();
}

std::string refusal(const Attributes& a) {
  try {
    gpt_config_from(a);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(GptCheckpoint, AttributesFollowTheFieldListAndRoundTrip) {
  const Attributes a = gpt_attributes(tiny());
  ASSERT_EQ(a.size(), std::size(kGptConfigFields));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, kGptConfigFields[i].name);
    EXPECT_EQ(std::get<int64_t>(a[i].value), tiny().*kGptConfigFields[i].member);
  }
  const GptConfig back = gpt_config_from(a);
  for (const GptConfigField& f : kGptConfigFields) EXPECT_EQ(back.*f.member, tiny().*f.member);
}

TEST(GptCheckpoint, SchemaGivesTheLayoutsTensors) {
  const CheckpointSchema& schema = gpt_checkpoint_schema();
  const Attributes a = gpt_attributes(tiny());
  ASSERT_EQ(schema.attribute_types().size(), a.size());
  const ParamLayout layout = gpt_param_layout(tiny());
  const StoredTensors t = schema.tensors(a);
  EXPECT_EQ(t.total, layout.total());
  ASSERT_EQ(t.tensors.size(), layout.tensors().size());
  for (size_t i = 0; i < t.tensors.size(); ++i) {
    EXPECT_EQ(t.tensors[i].name, layout.tensors()[i].name);
    EXPECT_EQ(t.tensors[i].shape, layout.tensors()[i].shape);
    EXPECT_EQ(t.tensors[i].offset, layout.tensors()[i].offset);
    EXPECT_EQ(t.tensors[i].numel, layout.tensors()[i].numel);
  }
  EXPECT_EQ(schema.elements(a), gpt_param_count(tiny()));
}

TEST(GptCheckpoint, BadAttributesAreRefusedByName) {
  Attributes a = gpt_attributes(tiny());
  a[5].value = int64_t{1} << 40;
  EXPECT_NE(refusal(a).find("dim is 1099511627776, outside [1, 2147483647]"), std::string::npos)
      << refusal(a);
  a = gpt_attributes(tiny());
  a[3].value = 2.0;
  EXPECT_NE(refusal(a).find("the integer layers"), std::string::npos) << refusal(a);
  a = gpt_attributes(tiny());
  std::swap(a[3], a[4]);
  EXPECT_NE(refusal(a).find("is heads, the GPT's is the integer layers"), std::string::npos)
      << refusal(a);
  a = gpt_attributes(tiny());
  a.pop_back();
  EXPECT_NE(refusal(a).find("5 attributes, the GPT has 6"), std::string::npos) << refusal(a);
  a = gpt_attributes(tiny());
  a[4].value = int64_t{3};  // heads must divide dim
  EXPECT_NE(refusal(a).find("heads"), std::string::npos) << refusal(a);
}
