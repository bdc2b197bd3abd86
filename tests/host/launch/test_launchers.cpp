// test_launchers.cpp — tests of host/launch's launcher registry (launchers.h): every launcher of
// the suite key registered once, the unknown name's error, availability, placement, the rank
// readers and the store address each launcher gives; and of a launch plan's extra roles
// (roles.h): their variables, a role that fails named with how, cleanup of whatever is left.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "launch/launchers.h"
#include "launch/roles.h"
#include "suite/schema.h"

using namespace dlhost;

namespace {

EnvLookup from(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// A scratch folder of this test process.
std::filesystem::path scratch(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("dlhost-test-launchers-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Gone or a zombie (an orphan waits for PID 1 to reap it), within 5 s.
bool gone(pid_t pid) {
  for (int i = 0; i < 50; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(stat, text);
    if (text.empty()) return true;
    const size_t close = text.rfind(')');
    if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z')
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Waits (bounded) until `path` has text: the role wrote it.
std::string wait_for_text(const std::filesystem::path& path) {
  for (int i = 0; i < 100; ++i) {
    if (std::string s = read_text(path); !s.empty()) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

RoleSpec shell_role(const std::string& role, const std::string& script, int count = 1) {
  RoleSpec r;
  r.role = role;
  r.count = count;
  r.command = {"sh", "-c", script};
  return r;
}

}  // namespace

TEST(launcher_registry, EverySuiteLauncherIsRegisteredOnceMpirunFirst) {
  EXPECT_EQ(launcher_names(), (std::vector<std::string>{"mpirun", "srun", "local"}));
  std::set<std::string> unique;
  for (const Launcher* l : launchers()) {
    ASSERT_NE(l, nullptr);
    EXPECT_TRUE(unique.insert(l->name()).second) << l->name() << " registered twice";
    EXPECT_EQ(find_launcher(l->name()), l);
    EXPECT_EQ(&launcher_named(l->name()), l);
  }
}

TEST(launcher_registry, TheSuiteKeyAllowsExactlyTheRegisteredLaunchers) {
  const auto& specs = key_specs();
  auto key = std::find_if(specs.begin(), specs.end(),
                          [](const KeySpec& k) { return k.name == "launcher"; });
  ASSERT_NE(key, specs.end());
  EXPECT_EQ(key->choices, launcher_names());
  EXPECT_EQ(key->def, "mpirun");
}

TEST(launcher_registry, AnUnknownNameListsTheKnownOnes) {
  EXPECT_EQ(find_launcher("pdsh"), nullptr);
  try {
    launcher_named("pdsh");
    FAIL() << "no error for an unknown launcher";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "unknown launcher 'pdsh' (known: mpirun, srun, local)");
  }
}

TEST(launcher_registry, AvailabilityIsTheProgramOnPathWithItsPackage) {
  EXPECT_EQ(launcher_named("local").unavailable_reason(), "");  // dlhost forks its ranks itself
  EXPECT_EQ(program_unavailable("sh", "a shell"), "");
  EXPECT_EQ(program_unavailable("/bin/sh", ""), "");
  EXPECT_EQ(program_unavailable("dlhost-no-such-launcher", "its package"),
            "dlhost-no-such-launcher is not on PATH (its package)");
  // With nothing on PATH, mpirun and srun say what is missing and where it comes from.
  const char* old = std::getenv("PATH");
  const std::string saved = old != nullptr ? old : "";
  const auto empty = scratch("path");
  setenv("PATH", empty.c_str(), 1);
  const std::string mpirun = launcher_named("mpirun").unavailable_reason();
  const std::string srun = launcher_named("srun").unavailable_reason();
  setenv("PATH", saved.c_str(), 1);
  std::filesystem::remove_all(empty);
  EXPECT_EQ(mpirun, "mpirun is not on PATH (Open MPI's openmpi-bin)");
  EXPECT_EQ(srun, "srun is not on PATH (Slurm's slurm-client, inside an allocation)");
}

TEST(launcher_registry, WhereEachMayPlaceTheRanks) {
  const Launcher& mpirun = launcher_named("mpirun");
  const Launcher& srun = launcher_named("srun");
  const Launcher& local = launcher_named("local");
  for (bool args : {false, true})
    for (bool slurm : {false, true}) {
      PlacementFacts f{args, slurm};
      EXPECT_EQ(mpirun.may_leave_this_machine(f), args || slurm) << args << slurm;
      EXPECT_TRUE(srun.may_leave_this_machine(f));
      EXPECT_FALSE(local.may_leave_this_machine(f));
    }
  EXPECT_TRUE(mpirun.reaches_test_hosts());
  EXPECT_FALSE(srun.reaches_test_hosts());
  EXPECT_FALSE(local.reaches_test_hosts());
}

TEST(launcher_registry, EachReadsItsOwnRanksVariablesOnly) {
  const auto local = from({{"DLHOST_WORLD_SIZE", "3"}, {"DLHOST_RANK", "2"}});
  const auto ompi = from({{"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  const auto slurm = from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"}});
  const std::map<std::string, EnvLookup> of{{"local", local}, {"mpirun", ompi}, {"srun", slurm}};
  for (const auto& [name, lookup] : of) {
    for (const Launcher* l : launchers()) {
      std::optional<RankEnv> e = l->rank_env(lookup);
      EXPECT_EQ(e.has_value(), l->name() == name) << l->name() << " read " << name << "'s";
      if (!e) continue;
      // The same place as the process-wide detection finds.
      const RankEnv d = detect_rank_env(lookup);
      EXPECT_EQ(e->rank, d.rank);
      EXPECT_EQ(e->size, d.size);
      EXPECT_EQ(e->local_rank, d.local_rank);
      EXPECT_EQ(e->local_size, d.local_size);
      EXPECT_EQ(e->launcher, d.launcher);
    }
  }
  EXPECT_EQ(launcher_named("local").rank_env(local)->rank, 2);
  EXPECT_EQ(launcher_named("mpirun").rank_env(ompi)->local_size, 2);
  EXPECT_EQ(launcher_named("srun").rank_env(slurm)->size, 6);
  // A bad value is the reader's error, as it is detect_rank_env's.
  EXPECT_THROW(launcher_named("local").rank_env(from({{"DLHOST_WORLD_SIZE", "x"}})),
               std::invalid_argument);
}

TEST(launcher_registry, LocalStartsDlhostsOwnCaseWorkersOnly) {
  LaunchSpec spec;
  spec.launcher = "local";
  spec.ranks = 3;
  spec.extra_args = {"--hostfile", "h"};  // it takes none: left out
  EXPECT_EQ(launcher_named("local").command(spec, {"/bin/dlhost", "case-worker", "{}"}, 1),
            (std::vector<std::string>{"/bin/dlhost", "case-local", "3", "{}"}));
  EXPECT_THROW(launcher_named("local").command(spec, {"/bin/true"}, 1), std::invalid_argument);
}

TEST(launcher_registry, TheStoreListensOnLoopbackForRanksOnThisHostAndAsToldOtherwise) {
  for (const Launcher* l : launchers()) {
    EXPECT_EQ(l->store_endpoint(nullptr, false, {}).address, "127.0.0.1") << l->name();
    EXPECT_EQ(l->store_endpoint("10.1.2.3", true, {}).address, "10.1.2.3") << l->name();
    EXPECT_EQ(l->store_endpoint(nullptr, true, {"-H", "127.0.0.1"}).address, "127.0.0.1")
        << l->name();
  }
}

TEST(launch_roles, APlansRolesAreChecked) {
  LaunchPlan plan;
  check_roles(plan);  // ranks alone
  plan.extra_roles = {shell_role("ps", "true", 2), shell_role("scheduler", "true")};
  check_roles(plan);
  auto refused = [&](RoleSpec r, const std::string& why) {
    LaunchPlan bad = plan;
    bad.extra_roles.push_back(std::move(r));
    try {
      check_roles(bad);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(e.what(), why);
    }
  };
  refused(shell_role("rank", "true"),
          "extra role 'rank': the ranks are the plan's own (spec.ranks, rank_command)");
  refused(shell_role("ps", "true"), "extra role 'ps' is given twice");
  refused(shell_role("", "true"), "an extra role of the launch has no name");
  refused(shell_role("server", "true", 0),
          "extra role 'server' has 0 processes; it needs at least 1");
  RoleSpec empty;
  empty.role = "server";
  refused(empty, "extra role 'server' has no command");
}

TEST(launch_roles, EachProcessIsToldItsRolePlaceAndOwnVariables) {
  const auto dir = scratch("env");
  RoleSpec r = shell_role("server",
                          "echo \"$DLHOST_ROLE $DLHOST_ROLE_INDEX $DLHOST_ROLE_COUNT $PORT\" > "
                          "\"$OUT/$DLHOST_ROLE_INDEX\"",
                          2);
  r.env = {{"OUT", dir.string()}, {"PORT", "7001"}};
  {
    RoleProcesses roles({r}, nullptr, 1);
    ASSERT_EQ(roles.size(), 2u);
    EXPECT_EQ(wait_for_text(dir / "0"), "server 0 2 7001");
    EXPECT_EQ(wait_for_text(dir / "1"), "server 1 2 7001");
  }
  std::filesystem::remove_all(dir);
}

// A tool runtime's roles: their output kept in a file (for the record's stderr tail), and each
// process run under its own wrapper (a test host's `ip netns exec NS`).
TEST(launch_roles, OutputGoesToTheFileAndEachProcessRunsUnderItsWrapper) {
  const auto dir = scratch("output");
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "roles.log").string();
  RoleSpec r = shell_role("ps", "echo \"out $DLHOST_ROLE_INDEX $WRAP\"; echo err >&2", 2);
  r.run_under = {{"env", "WRAP=first"}, {}};  // the second runs as it is
  {
    RoleProcesses roles({r}, nullptr, 1, out);
    for (int i = 0; i < 200 && roles.running() != ""; ++i) {
      (void)roles.failed();
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    EXPECT_FALSE(roles.failed());
  }
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("out 0 first\n"), std::string::npos) << text;
  EXPECT_NE(text.find("out 1 \n"), std::string::npos) << text;
  EXPECT_NE(text.find("err\n"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
  EXPECT_THROW(RoleProcesses({r}, nullptr, 1, (dir / "no" / "such" / "file").string()),
               std::runtime_error);
}

TEST(launch_roles, ARoleThatExitsNonZeroIsNamedWithItsCode) {
  RoleProcesses roles({shell_role("ps", "sleep 30"), shell_role("scheduler", "exit 3")}, nullptr,
                      1);
  std::optional<RoleProcesses::Exit> failed;
  for (int i = 0; i < 200 && !failed; ++i) {
    failed = roles.failed();
    if (!failed) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(failed);
  EXPECT_FALSE(failed->crashed());
  EXPECT_EQ(failed->text(),
            "role scheduler 0 (pid " + std::to_string(roles.pid(1)) + ") exited with code 3");
  EXPECT_EQ(roles.running(), "ps 0 (pid " + std::to_string(roles.pid(0)) + ")");
  roles.end();
  EXPECT_EQ(roles.running(), "");
  EXPECT_TRUE(gone(roles.pid(0)));
}

TEST(launch_roles, AKilledRoleIsACrashAndOneThatExitsZeroHasFinished) {
  RoleProcesses roles({shell_role("done", "exit 0"), shell_role("ps", "kill -9 $$")}, nullptr, 1);
  std::optional<RoleProcesses::Exit> failed;
  for (int i = 0; i < 200 && !failed; ++i) {
    failed = roles.failed();
    if (!failed) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(failed);
  EXPECT_TRUE(failed->crashed());
  EXPECT_EQ(failed->role, "ps");
  EXPECT_EQ(failed->text(),
            "role ps 0 (pid " + std::to_string(roles.pid(1)) + ") was killed by SIGKILL");
}

TEST(launch_roles, EndLeavesNothingBehindEvenARoleThatIgnoresSigterm) {
  const auto dir = scratch("end");
  // A role that ignores SIGTERM and has a child of its own (a JVM's, a script's): both go.
  RoleSpec stubborn = shell_role(
      "master",
      "trap '' TERM; sleep 300 & echo $! > \"$OUT/child\"; echo $$ > \"$OUT/self\"; wait");
  stubborn.env = {{"OUT", dir.string()}};
  RoleProcesses roles({stubborn}, nullptr, 0.2);
  const std::string child = wait_for_text(dir / "child");
  ASSERT_FALSE(child.empty());
  ASSERT_FALSE(wait_for_text(dir / "self").empty());
  EXPECT_FALSE(roles.failed());  // still running: not a failure
  roles.end();
  EXPECT_TRUE(gone(roles.pid(0)));
  EXPECT_TRUE(gone(static_cast<pid_t>(std::stol(child))));
  std::filesystem::remove_all(dir);
}

TEST(launch_roles, ACommandThatCannotStartFailsWith127) {
  RoleSpec r;
  r.role = "server";
  r.command = {"dlhost-no-such-role-program"};
  RoleProcesses roles({r}, nullptr, 1);
  std::optional<RoleProcesses::Exit> failed;
  for (int i = 0; i < 200 && !failed; ++i) {
    failed = roles.failed();
    if (!failed) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_TRUE(failed);
  EXPECT_NE(failed->text().find("exited with code 127"), std::string::npos) << failed->text();
}

TEST(launch_roles, TheTestHookReadsOneRole) {
  EXPECT_TRUE(test_extra_roles(nullptr).empty());
  EXPECT_TRUE(test_extra_roles("").empty());
  auto roles = test_extra_roles("ps=kill -9 $$");
  ASSERT_EQ(roles.size(), 1u);
  EXPECT_EQ(roles[0].role, "ps");
  EXPECT_EQ(roles[0].command, (std::vector<std::string>{"sh", "-c", "kill -9 $$"}));
  EXPECT_THROW(test_extra_roles("no role"), std::invalid_argument);
  EXPECT_THROW(test_extra_roles("=true"), std::invalid_argument);
}
