// The communicator as a lone process (MPI singleton), and under mpirun when ctest's caller
// runs this binary with `mpirun -n K`: the assertions hold for any world size.
#include "railyard/communicator.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace railyard {
namespace {

TEST(Communicator, RanksAreConsistent) {
  Communicator& c = Communicator::world();
  EXPECT_GE(c.size(), 1);
  EXPECT_GE(c.rank(), 0);
  EXPECT_LT(c.rank(), c.size());
  EXPECT_LT(c.local_rank(), c.local_size());
  EXPECT_LE(c.local_size(), c.size());
  EXPECT_TRUE(c.launcher() == "none" || c.launcher() == "mpirun" || c.launcher() == "srun");
  EXPECT_EQ(&c, &Communicator::world());
}

TEST(Communicator, AllreduceSumsOverRanks) {
  Communicator& c = Communicator::world();
  std::vector<float> f = {1.0f, static_cast<float>(c.rank())};
  c.allreduce_sum(f.data(), f.size());
  EXPECT_EQ(f[0], static_cast<float>(c.size()));
  EXPECT_EQ(f[1], static_cast<float>(c.size() * (c.size() - 1) / 2));
  std::vector<double> d = {0.5};
  c.allreduce_sum(d.data(), d.size());
  EXPECT_EQ(d[0], 0.5 * c.size());
  EXPECT_EQ(c.allreduce_max(c.rank()), c.size() - 1);
  EXPECT_EQ(c.allreduce_min(c.rank() + 10), 10);
}

TEST(Communicator, BroadcastAndGather) {
  Communicator& c = Communicator::world();
  int v = c.rank() == 0 ? 42 : -1;
  c.broadcast(&v, sizeof v, 0);
  EXPECT_EQ(v, 42);
  std::vector<std::string> all = c.gather_strings("rank" + std::to_string(c.rank()), 0);
  if (c.rank() == 0) {
    ASSERT_EQ(all.size(), static_cast<size_t>(c.size()));
    for (int r = 0; r < c.size(); ++r) EXPECT_EQ(all[r], "rank" + std::to_string(r));
  } else {
    EXPECT_TRUE(all.empty());
  }
  c.barrier();
}

TEST(Communicator, AllgatherOrAndPointToPoint) {
  Communicator& c = Communicator::world();
  const auto r = static_cast<uint64_t>(c.rank());
  const std::vector<uint64_t> all = c.allgather({r, 100 + r});
  ASSERT_EQ(all.size(), 2 * static_cast<size_t>(c.size()));
  for (int q = 0; q < c.size(); ++q) {
    EXPECT_EQ(all[2 * q], static_cast<uint64_t>(q));
    EXPECT_EQ(all[2 * q + 1], 100 + static_cast<uint64_t>(q));
  }
  std::vector<uint64_t> bits(2, 0);
  bits[c.rank() % 2] = uint64_t{1} << c.rank();
  c.allreduce_or(bits.data(), bits.size());
  uint64_t expect[2] = {0, 0};
  for (int q = 0; q < c.size(); ++q) expect[q % 2] |= uint64_t{1} << q;
  EXPECT_EQ(bits[0], expect[0]);
  EXPECT_EQ(bits[1], expect[1]);
  // A ring: each rank sends its number to the next and receives the previous one's.
  if (c.size() > 1) {
    const int next = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) % c.size();
    const std::vector<float> mine(1000, static_cast<float>(c.rank()));
    std::vector<float> got(1000, -1.0f);
    if (c.rank() % 2 == 0) {
      c.send(mine.data(), mine.size() * sizeof(float), next, 5);
      c.recv(got.data(), got.size() * sizeof(float), prev, 5);
    } else {
      c.recv(got.data(), got.size() * sizeof(float), prev, 5);
      c.send(mine.data(), mine.size() * sizeof(float), next, 5);
    }
    EXPECT_EQ(got, std::vector<float>(1000, static_cast<float>(prev)));
  }
}

}  // namespace
}  // namespace railyard
