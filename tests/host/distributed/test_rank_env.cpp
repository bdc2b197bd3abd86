// test_rank_env.cpp — the launcher-environment parser (distributed/rank_env.h): which rank of how
// many a process is under no launcher, dlhost's local launcher, Open MPI, Slurm and MPICH, and a
// clear error for an inconsistent environment. Pure host code: needs no MPI.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

#include "distributed/rank_env.h"

namespace {

dlhost::RankEnv detect(const std::map<std::string, std::string>& vars) {
  return dlhost::detect_rank_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(RankEnv, NoLauncherIsAWorldOfOne) {
  auto e = detect({});
  EXPECT_EQ(e.launcher, "none");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.size, 1);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_size, 1);
}

TEST(RankEnv, DlhostLocalLauncher) {
  auto e = detect({{"DLHOST_RANK", "1"}, {"DLHOST_WORLD_SIZE", "2"}});
  EXPECT_EQ(e.launcher, "local");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_THROW(detect({{"DLHOST_RANK", "2"}, {"DLHOST_WORLD_SIZE", "2"}}), std::invalid_argument);
}

TEST(RankEnv, OpenMpi) {
  auto e = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"PMIX_RANK", "3"},
                   // mpirun inside salloc: Slurm's variables describe the allocation, not MPI.
                   {"SLURM_NTASKS", "2"},
                   {"SLURM_PROCID", "0"}});
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
}

TEST(RankEnv, SlurmSrun) {
  auto e = detect({{"SLURM_PROCID", "5"},
                   {"SLURM_NTASKS", "7"},
                   {"SLURM_LOCALID", "1"},
                   {"SLURM_NODEID", "2"},
                   {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                   {"PMIX_RANK", "5"}});
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 7);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(dlhost::slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(dlhost::slurm_tasks_on_node("4", 0), 4);
  EXPECT_THROW(dlhost::slurm_tasks_on_node("2(x3", 0), std::invalid_argument);
  EXPECT_THROW(dlhost::slurm_tasks_on_node("2,1", 2), std::invalid_argument);
}

TEST(RankEnv, BareSallocShellIsNotARankOfTheAllocation) {
  auto e = detect({{"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "7"}});
  EXPECT_EQ(e.launcher, "none");
  EXPECT_EQ(e.size, 1);
}

TEST(RankEnv, MpichHydra) {
  auto e = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(e.launcher, "pmi");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.size, 2);
}

TEST(RankEnv, InconsistentOrUnreadableIsAnErrorNamingTheVariable) {
  try {
    detect({{"OMPI_COMM_WORLD_RANK", "two"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("OMPI_COMM_WORLD_RANK='two'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(detect({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
               std::invalid_argument);
  EXPECT_THROW(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "-1"}}), std::invalid_argument);
  EXPECT_THROW(detect({{"PMIX_RANK", "0"}}), std::invalid_argument);
}

}  // namespace
