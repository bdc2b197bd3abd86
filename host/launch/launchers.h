// launchers.h — the launchers a multi-rank job can be started with (the suite key `launcher`:
// mpirun, srun, local), one registered object each, and the roles of a launch plan. Everything
// that differs between launchers is asked of its object here: the key's allowed values
// (suite/schema.cpp), whether the ranks may leave this machine (suite/skip.cpp), whether it
// reaches the test hosts (suite/suite.cpp), the command line that starts N ranks
// (isolate/case_process.cpp, commbench), how a rank finds its place (distributed/rank_env.h's
// reader for it) and where the rendezvous store listens (distributed/store_address.h).
//
// Adding a launcher: one file that defines a class derived from Launcher and its make_*_launcher()
// (see launcher_srun.cpp), and one registration: its maker in launchers.cpp's table (declared
// below) and the file in the dlhost_launchers sources (launch/CMakeLists.txt). docs/distributed.md
// says more.
//
// A library of its own (dlhost_launchers) on dlhost_distributed alone, so that the suite loader,
// which sits under core, can ask it without linking the rest of launch/ (process groups, test
// hosts). Thread-safety: the table is built once, on first use (a function-local static); then
// every function here only reads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/rank_env.h"
#include "distributed/store_address.h"

namespace dlhost {

// What the launcher is asked to start.
struct LaunchSpec {
  std::string launcher = "mpirun";  // a registered launcher's name
  int64_t ranks = 1;
  int64_t threads = 1;         // each rank's threads (srun's --cpus-per-task; oversubscription)
  bool oversubscribe = false;  // asked for (the case key); also implied by too few cores
  std::optional<int64_t> ranks_per_node;
  // A rendezvous store is served to the ranks (served_store.h): DLHOST_STORE is passed on.
  bool store = false;
  std::vector<std::string> extra_args;  // the launcher's own, after dlhost's
};

// The variables mpirun passes on to every rank when this process has them (srun and dlhost's
// fork launcher pass the whole environment on): the log level, the plugin path, the test hook
// DLHOST_DUMP_PARAMS_DIR, OpenMP's wait policy, and the run's progress channel
// (DLHOST_PROGRESS, console/progress_channel.h's kProgressVariable).
const std::vector<std::string>& forwarded_variables();

// Where the ranks of a case may be placed, as far as the launcher decides it.
struct PlacementFacts {
  bool launcher_args = false;  // the case or the command line gives launcher arguments
  bool slurm_job = false;      // dlhost runs inside a Slurm allocation (SLURM_JOB_ID)
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // The suite key's value ("mpirun").
  virtual std::string name() const = 0;
  // "" when it can start processes on this machine, else why not ("mpirun is not on PATH ...").
  virtual std::string unavailable_reason() const = 0;
  // Whether it may place ranks on machines other than this one (then this machine's cores and
  // GPUs do not limit the case: suite/skip.cpp).
  virtual bool may_leave_this_machine(const PlacementFacts& facts) const = 0;
  // Whether it reaches dlhost's test hosts (an emulated `interconnect`): only through mpirun's
  // remote agent today.
  virtual bool reaches_test_hosts() const { return false; }
  // The command that starts spec.ranks copies of `rank_command`; `host_cores` decides
  // oversubscription. Throws std::invalid_argument when it cannot start that command.
  virtual std::vector<std::string> command(const LaunchSpec& spec,
                                           const std::vector<std::string>& rank_command,
                                           int host_cores) const = 0;
  // The place of this process among the ranks it started, from its variables; nullopt when they
  // are not there (another launcher started this process, or none).
  virtual std::optional<RankEnv> rank_env(const EnvLookup& lookup) const = 0;
  // Where the rendezvous store of its ranks listens: `other_hosts` when the ranks may be on other
  // hosts (the launcher's placement or test hosts). The default is store_address.h's choice.
  virtual StoreEndpoint store_endpoint(const char* override_address, bool other_hosts,
                                       const std::vector<std::string>& launcher_args) const;
};

// Every registered launcher, in the order the suite key lists them (mpirun first, its default).
const std::vector<const Launcher*>& launchers();
std::vector<std::string> launcher_names();
// The launcher of that name, or nullptr.
const Launcher* find_launcher(const std::string& name);
// The launcher of that name; throws std::invalid_argument "unknown launcher 'X' (known: mpirun,
// srun, local)" for another.
const Launcher& launcher_named(const std::string& name);

// The registered launchers' makers (one line each in launchers.cpp's table, in the order of
// launchers()); each launcher's file defines its own. An explicit table, not self-registering
// static objects: the linker drops an object file of a static library that nothing references.
std::unique_ptr<Launcher> make_mpirun_launcher();
std::unique_ptr<Launcher> make_srun_launcher();
std::unique_ptr<Launcher> make_local_launcher();

// "" when `program` is found on PATH (or is a path to an executable), else "PROGRAM is not on
// PATH" with `hint` after it.
std::string program_unavailable(const std::string& program, const std::string& hint);

// --- Roles -----------------------------------------------------------------------------------
// The role of today's ranks. A tool's own distributed runtime adds roles of its own
// (TensorFlow's "ps", MXNet's "scheduler" and "server", Spark's "master" and "worker").
inline constexpr const char* kRankRole = "rank";

// Processes of one role: `count` copies of `command`, each with `env` added to the job's
// environment and DLHOST_ROLE, DLHOST_ROLE_INDEX, DLHOST_ROLE_COUNT telling it its place.
struct RoleSpec {
  std::string role;
  int count = 1;
  std::vector<std::string> command;
  std::vector<std::pair<std::string, std::string>> env;
  // Per process (by index; missing or empty: none): what its command runs under, e.g. a test
  // host's `ip netns exec NS` (isolate/runtime_roles.h places each role on a host of its own).
  std::vector<std::vector<std::string>> run_under;
};

// What one job starts: the ranks (role "rank", spec.ranks copies of rank_command under the
// launcher) and the extra roles, started beside them on this machine and ended with them
// (launch/roles.h).
struct LaunchPlan {
  LaunchSpec spec;
  std::vector<std::string> rank_command;
  std::vector<RoleSpec> extra_roles;
};

// Checks the plan's roles: names non-empty, not "rank", unique, counts >= 1, commands given.
// Throws std::invalid_argument naming the role.
void check_roles(const LaunchPlan& plan);

}  // namespace dlhost
