// test_launch.cpp — tests of host/launch: the launcher's command line (mpirun's oversubscription
// rule, ranks per node, the forwarded variables, srun), the process group (its output, its
// timeout with SIGTERM then SIGKILL, the caller's stop, a command that cannot start) and
// dlhost's fork launcher.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/host_api.h"
#include "launch/launcher.h"
#include "launch/process_group.h"

namespace dlhost {
namespace {

using Clock = std::chrono::steady_clock;

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
  return s;
}

bool has(const std::vector<std::string>& v, const std::string& arg) {
  return (" " + joined(v) + " ").find(" " + arg + " ") != std::string::npos;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(launcher, MpirunOversubscribesWhenRanksTimesThreadsOutnumberTheCores) {
  LaunchSpec spec;
  spec.ranks = 2;
  spec.threads = 4;
  EXPECT_FALSE(has(launcher_command(spec, {"w"}, 8), "--oversubscribe"));
  EXPECT_TRUE(has(launcher_command(spec, {"w"}, 7), "--oversubscribe"));
  spec.threads = 1;
  spec.oversubscribe = true;  // the case key asks for it whatever the cores
  EXPECT_TRUE(has(launcher_command(spec, {"w"}, 64), "--oversubscribe"));
}

TEST(launcher, MpirunArgumentsInOrder) {
  for (const std::string& var : forwarded_variables()) unsetenv(var.c_str());
  setenv("DLHOST_LOG_LEVEL", "info", 1);
  LaunchSpec spec;
  spec.ranks = 4;
  spec.ranks_per_node = 2;
  spec.store = true;
  spec.extra_args = {"--mca", "btl", "tcp,self"};
  const auto cmd = launcher_command(spec, {"/bin/dlhost", "case-worker", "{}"}, 64);
  unsetenv("DLHOST_LOG_LEVEL");
  const std::string root = geteuid() == 0 ? " --allow-run-as-root" : "";
  EXPECT_EQ(joined(cmd), "mpirun -np 4" + root +
                             " --bind-to none --map-by ppr:2:node -x DLHOST_LOG_LEVEL -x "
                             "DLHOST_STORE --mca btl tcp,self /bin/dlhost case-worker {}");
}

TEST(launcher, MpirunPassesTheProgressChannelOnWhenSet) {
  LaunchSpec spec;
  spec.ranks = 2;
  EXPECT_FALSE(has(launcher_command(spec, {"w"}, 64), "DLHOST_STORE"));
  setenv("DLHOST_PROGRESS", "x", 1);
  EXPECT_TRUE(has(launcher_command(spec, {"w"}, 64), "-x DLHOST_PROGRESS"));
  unsetenv("DLHOST_PROGRESS");
}

TEST(launcher, Srun) {
  LaunchSpec spec;
  spec.launcher = "srun";
  spec.ranks = 2;
  spec.threads = 3;
  spec.ranks_per_node = 1;
  EXPECT_EQ(joined(launcher_command(spec, {"w"}, 64)),
            "srun -n 2 --mpi=pmix --kill-on-bad-exit=1 --cpus-per-task=3 --ntasks-per-node=1 w");
}

TEST(launcher, AnUnknownLauncherIsRefused) {
  LaunchSpec spec;
  spec.launcher = "pdsh";
  EXPECT_THROW(launcher_command(spec, {"w"}, 64), Error);
}

TEST(process_group, PassesOutputOnAndGivesTheExitCode) {
  ProcessGroup group({"sh", "-c", "echo out; echo err >&2; exit 3"}, SpawnOptions{});
  std::string out, err;
  Supervision s;
  s.on_stdout = [&](const char* d, size_t n) { out.append(d, n); };
  s.on_stderr = [&](const char* d, size_t n) { err.append(d, n); };
  const GroupOutcome o = group.supervise(s);
  EXPECT_EQ(exit_code(o.status), 3);
  EXPECT_FALSE(o.stopped);
  EXPECT_EQ(out, "out\n");
  EXPECT_EQ(err, "err\n");
}

TEST(process_group, EndsTheWholeGroupAtItsTimeout) {
  // The leader's child holds the pipes open: only the group's end lets supervise() return.
  const auto start = Clock::now();
  ProcessGroup group({"sh", "-c", "sleep 30 & sleep 30"}, SpawnOptions{});
  Supervision s;
  s.timeout_s = 0.3;
  s.kill_grace_s = 5;
  std::string said;
  s.on_stop = [&](const char* why) { said = why; };
  const GroupOutcome o = group.supervise(s);
  EXPECT_TRUE(o.timed_out);
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(said, "timed out");
  ASSERT_TRUE(WIFSIGNALED(o.status));
  EXPECT_EQ(WTERMSIG(o.status), SIGTERM);
  EXPECT_LT(seconds_since(start), 4.0);
}

TEST(process_group, KillsAGroupThatIgnoresSigtermAfterTheGrace) {
  const auto start = Clock::now();
  ProcessGroup group({"sh", "-c", "trap '' TERM; sleep 30"}, SpawnOptions{});
  Supervision s;
  s.timeout_s = 0.2;
  s.kill_grace_s = 0.3;
  const GroupOutcome o = group.supervise(s);
  EXPECT_TRUE(o.timed_out);
  ASSERT_TRUE(WIFSIGNALED(o.status));
  EXPECT_EQ(WTERMSIG(o.status), SIGKILL);
  EXPECT_GE(seconds_since(start), 0.45);
  EXPECT_LT(seconds_since(start), 4.0);
}

TEST(process_group, EndsOnTheCallersWordOrAnInterruption) {
  ProcessGroup group({"sleep", "30"}, SpawnOptions{});
  Supervision s;
  int turns = 0;
  s.should_stop = [&](Clock::time_point) { return ++turns == 2; };
  const GroupOutcome o = group.supervise(s);
  EXPECT_TRUE(o.stopped);
  EXPECT_FALSE(o.timed_out);
  EXPECT_FALSE(o.interrupted);

  volatile int interrupted = 1;
  ProcessGroup other({"sleep", "30"}, SpawnOptions{});
  Supervision t;
  t.interrupted = &interrupted;
  const GroupOutcome p = other.supervise(t);
  EXPECT_TRUE(p.interrupted);
  EXPECT_FALSE(p.timed_out);
}

TEST(process_group, ACommandThatCannotStartExits127SayingWhy) {
  SpawnOptions options;
  options.error_prefix = "test: ";
  ProcessGroup group({"/nonexistent/dlhost-launch-test"}, options);
  std::string err;
  Supervision s;
  s.on_stderr = [&](const char* d, size_t n) { err.append(d, n); };
  const GroupOutcome o = group.supervise(s);
  EXPECT_EQ(exit_code(o.status), 127);
  EXPECT_EQ(err.rfind("test: cannot start /nonexistent/dlhost-launch-test: ", 0), 0u) << err;
}

TEST(local_ranks, EachRankIsToldItsPlaceAndOneFailureFailsAll) {
  EXPECT_EQ(
      run_local_ranks(
          3, {"/bin/sh", "-c", "test \"$DLHOST_WORLD_SIZE\" = 3 && test \"$DLHOST_RANK\" -lt 3"},
          "test"),
      0);
  // Rank 1 fails at once; the others would sleep for 30 s unless it ended them.
  const auto start = Clock::now();
  EXPECT_EQ(run_local_ranks(
                3, {"/bin/sh", "-c", "test \"$DLHOST_RANK\" = 1 && exit 1; exec sleep 30"}, "test"),
            1);
  EXPECT_LT(seconds_since(start), 10.0);
}

}  // namespace
}  // namespace dlhost
