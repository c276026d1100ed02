#include "railyard/data_loader.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <vector>

namespace railyard {
namespace {

namespace fs = std::filesystem;

// A dataset whose token i is i, so a row's first token names its sequence (first token / T).
class DataLoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = (fs::temp_directory_path() / ("railyard_loader_" + std::to_string(getpid()) + ".h5"))
                .string();
    std::vector<uint32_t> t(kTokens);
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint32_t>(i % 60000);
    write_token_file(path_, t, 60000);
  }
  static void TearDownTestSuite() { fs::remove(path_); }
  static constexpr size_t kTokens = 16 * 40 + 1;  // 40 sequences of T=16
  static inline std::string path_;
};

// The sequence index of each row of a batch (token i of the data is i).
std::vector<int> rows(const Batch& b, int T) {
  std::vector<int> r;
  for (size_t i = 0; i < b.inputs.size(); i += static_cast<size_t>(T)) r.push_back(b.inputs[i] / T);
  return r;
}

TEST_F(DataLoaderTest, TargetsAreInputsShiftedByOne) {
  TokenDataset d({path_});
  DataLoader l(d, 3, 16, 0, 1, 7);
  Batch b;
  l.next(b);
  ASSERT_EQ(b.inputs.size(), 48u);
  for (int r = 0; r < 3; ++r) {
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(b.targets[r * 16 + t], b.inputs[r * 16 + t] + 1);
      if (t > 0) {
        EXPECT_EQ(b.inputs[r * 16 + t], b.inputs[r * 16 + t - 1] + 1);
      }
    }
    EXPECT_EQ(b.inputs[r * 16] % 16, 0);
  }
}

TEST_F(DataLoaderTest, RanksSplitTheSameGlobalBatchForAnyWorldSize) {
  TokenDataset d({path_});
  const int global = 8, T = 16;
  std::vector<std::vector<int>> reference;  // per global micro-batch, world 1
  DataLoader one(d, global, T, 0, 1, 42);
  for (int step = 0; step < 12; ++step) {  // crosses an epoch boundary (40 / 8 = 5 per epoch)
    Batch b;
    one.next(b);
    reference.push_back(rows(b, T));
  }
  for (int world : {2, 4}) {
    std::vector<DataLoader> ranks;
    for (int r = 0; r < world; ++r) ranks.emplace_back(d, global / world, T, r, world, 42);
    for (int step = 0; step < 12; ++step) {
      std::vector<int> joined;
      for (DataLoader& l : ranks) {
        Batch b;
        l.next(b);
        std::vector<int> part = rows(b, T);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, reference[step]) << "world " << world << " step " << step;
    }
    EXPECT_EQ(ranks[0].position().cursor, one.position().cursor);
    EXPECT_EQ(ranks[0].position().epoch, one.position().epoch);
  }
}

TEST_F(DataLoaderTest, EachEpochVisitsEverySequenceOnceInASeededOrder) {
  TokenDataset d({path_});
  DataLoader l(d, 10, 16, 0, 1, 1);
  std::vector<std::vector<int>> epochs(2);
  for (int e = 0; e < 2; ++e) {
    for (int i = 0; i < 4; ++i) {
      Batch b;
      l.next(b);
      std::vector<int> r = rows(b, 16);
      epochs[e].insert(epochs[e].end(), r.begin(), r.end());
    }
  }
  for (auto& e : epochs) {
    std::vector<int> sorted = e;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> all(40);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all);
  }
  EXPECT_NE(epochs[0], epochs[1]) << "the order must change between epochs";

  DataLoader again(d, 10, 16, 0, 1, 1), other(d, 10, 16, 0, 1, 2);
  Batch a, b, c;
  again.next(a);
  other.next(c);
  EXPECT_EQ(rows(a, 16), std::vector<int>(epochs[0].begin(), epochs[0].begin() + 10));
  EXPECT_NE(rows(a, 16), rows(c, 16)) << "the order must depend on the seed";

  DataLoader plain(d, 4, 16, 0, 1, 1, false);
  plain.next(b);
  EXPECT_EQ(rows(b, 16), (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(DataLoaderTest, PositionRestoresTheSameContinuation) {
  TokenDataset d({path_});
  DataLoader a(d, 6, 16, 0, 1, 9);
  Batch b;
  for (int i = 0; i < 8; ++i) a.next(b);  // 48 sequences: into the second epoch
  LoaderPosition saved = a.position();
  EXPECT_EQ(saved.epoch, 1u);
  std::vector<std::vector<int>> expect;
  for (int i = 0; i < 10; ++i) {
    a.next(b);
    expect.push_back(rows(b, 16));
  }
  // Restored on two ranks of 3: the same global sequences.
  DataLoader r0(d, 3, 16, 0, 2, 9), r1(d, 3, 16, 1, 2, 9);
  r0.set_position(saved);
  r1.set_position(saved);
  for (int i = 0; i < 10; ++i) {
    Batch x, y;
    r0.next(x);
    r1.next(y);
    std::vector<int> got = rows(x, 16), second = rows(y, 16);
    got.insert(got.end(), second.begin(), second.end());
    EXPECT_EQ(got, expect[i]) << i;
  }
  LoaderPosition wrong = saved;
  wrong.seed = 10;
  EXPECT_THROW(r0.set_position(wrong), std::invalid_argument);
  wrong = saved;
  wrong.cursor = 41;
  EXPECT_THROW(r0.set_position(wrong), std::invalid_argument);
}

TEST_F(DataLoaderTest, TooLittleDataIsAClearError) {
  TokenDataset d({path_});
  try {
    DataLoader l(d, 1, static_cast<int>(kTokens), 0, 1, 0);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("shorter than one sequence"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(path_), std::string::npos) << e.what();
  }
  try {
    DataLoader l(d, 11, 16, 0, 4, 0);
    FAIL() << "expected DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("global batch"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(DataLoader(d, 10, 16, 3, 4, 0));
}

}  // namespace
}  // namespace railyard
