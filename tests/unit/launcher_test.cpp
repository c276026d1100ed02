#include "railyard/launcher.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace railyard {
namespace {

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : {"SLURM_STEP_ID", "SLURM_PROCID", "SLURM_MPI_TYPE", "PMIX_RANK",
                          "PMI_RANK", "PMI_FD", "OMPI_COMM_WORLD_SIZE"}) {
      unsetenv(v);
    }
  }
};

TEST_F(LauncherTest, SrunWithoutPmiNamesTheFix) {
  setenv("SLURM_STEP_ID", "0", 1);
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_MPI_TYPE", "none", 1);
  const std::string m = missing_pmi_message();
  EXPECT_NE(m.find("(srun --mpi=none)"), std::string::npos) << m;
  EXPECT_NE(m.find("srun --mpi=pmix railyard-train"), std::string::npos) << m;
  EXPECT_NE(m.find("MpiDefault=pmix"), std::string::npos) << m;
}

TEST_F(LauncherTest, PmixOrMpirunOrNoSlurmStepIsFine) {
  EXPECT_EQ(missing_pmi_message(), "");  // a lone process: MPI starts as a singleton
  setenv("SLURM_PROCID", "0", 1);
  EXPECT_EQ(missing_pmi_message(), "");  // a batch script, not a step started by srun
  setenv("SLURM_STEP_ID", "0", 1);
  for (const char* v : {"PMIX_RANK", "PMI_RANK", "PMI_FD", "OMPI_COMM_WORLD_SIZE"}) {
    setenv(v, "0", 1);
    EXPECT_EQ(missing_pmi_message(), "") << v;
    unsetenv(v);
  }
  EXPECT_NE(missing_pmi_message(), "");
}

}  // namespace
}  // namespace railyard
