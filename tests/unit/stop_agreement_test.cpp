// Runs on one rank under ctest; tests/integration/ckpt_mpi_units.sh also runs it on 3 ranks.
#include <gtest/gtest.h>

#include "railyard/communicator.hpp"
#include "railyard/preempt.hpp"

using railyard::Communicator;
using railyard::StopAction;

TEST(AgreeStop, NobodyStopsWhenNobodyAsks) {
  EXPECT_EQ(railyard::agree_stop(Communicator::world(), StopAction::kNone), StopAction::kNone);
}

TEST(AgreeStop, OneRankAskingStopsAll) {
  Communicator& comm = Communicator::world();
  const int asker = comm.size() - 1;
  const StopAction local = comm.rank() == asker ? StopAction::kSaveExit : StopAction::kNone;
  EXPECT_EQ(railyard::agree_stop(comm, local), StopAction::kSaveExit);
}

TEST(AgreeStop, StrongestRequestWins) {
  Communicator& comm = Communicator::world();
  const StopAction local = comm.rank() == 0 ? StopAction::kSaveRequeue : StopAction::kSaveExit;
  EXPECT_EQ(railyard::agree_stop(comm, local), StopAction::kSaveRequeue);
}
