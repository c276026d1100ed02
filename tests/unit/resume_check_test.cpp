// A resume that changes --data or the global batch against the checkpoint's run is said.
#include "railyard/resume_check.hpp"

#include <gtest/gtest.h>

namespace railyard {
namespace {

TrainConfig config(std::vector<std::string> data, int batch) {
  TrainConfig c;
  c.data = std::move(data);
  c.batch = batch;
  return c;
}

TEST(ResumeCheck, TheSameRunSaysNothing) {
  const TrainConfig c = config({"a.h5", "b.h5"}, 4);
  EXPECT_TRUE(resume_differences(c, 2, c.to_json(), 2).empty());
  // Other ranks, same global batch (2 x 4 = 4 x 2): the data order continues.
  EXPECT_TRUE(resume_differences(config({"a.h5", "b.h5"}, 2), 4, c.to_json(), 2).empty());
}

TEST(ResumeCheck, OtherDataOrGlobalBatchIsNamedWithBothValues) {
  const std::string saved = config({"a.h5"}, 4).to_json();
  std::vector<std::string> w = resume_differences(config({"other.h5"}, 4), 2, saved, 2);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("--data [other.h5], the checkpoint was trained on [a.h5]"), std::string::npos)
      << w[0];
  w = resume_differences(config({"a.h5"}, 8), 2, saved, 2);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("global batch of 16 sequences (2 ranks x --batch 8), the checkpoint's was "
                      "8 (2 x 4)"),
            std::string::npos)
      << w[0];
  w = resume_differences(config({"a.h5"}, 4), 1, "not json", 2);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("cannot check"), std::string::npos);
}

}  // namespace
}  // namespace railyard
