// requeue_self against a real job is covered by tests/fault/ckpt_time_limit_requeue.sh; here only
// the refusals that need no Slurm controller.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "railyard/preempt.hpp"

TEST(RequeueSelf, OutsideAJobExplains) {
  unsetenv("SLURM_JOB_ID");
  std::string error;
  EXPECT_FALSE(railyard::requeue_self(&error));
  EXPECT_NE(error.find("SLURM_JOB_ID"), std::string::npos) << error;
}

TEST(RequeueSelf, RejectsMalformedJobId) {
  setenv("SLURM_JOB_ID", "12x", 1);
  std::string error;
  EXPECT_FALSE(railyard::requeue_self(&error));
  EXPECT_NE(error.find("'12x' is not a job number"), std::string::npos) << error;
  unsetenv("SLURM_JOB_ID");
}

TEST(RequeueSelf, UnreadableSlurmConfIsAnErrorNotAnExit) {
  setenv("SLURM_JOB_ID", "42", 1);
  setenv("SLURM_CONF", "/nonexistent/railyard/slurm.conf", 1);
  std::string error;
  EXPECT_FALSE(railyard::requeue_self(&error));
  EXPECT_FALSE(error.empty());
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_CONF");
}

TEST(JobIsPreempted, OutsideAJobIsUnknownWithAReason) {
  unsetenv("SLURM_JOB_ID");
  const railyard::PreemptQuery q = railyard::job_is_preempted();
  EXPECT_FALSE(q.known);
  EXPECT_FALSE(q.preempted);
  EXPECT_NE(q.error.find("SLURM_JOB_ID"), std::string::npos) << q.error;
}
