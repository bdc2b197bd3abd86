// rank_env.cpp — rank, world size and local rank from launcher environment variables (see
// rank_env.h for the precedence and why).
#include "distributed/rank_env.h"

#include <signal.h>
#include <sys/prctl.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <vector>

namespace dlhost {
namespace {

int parse_int(const char* name, const char* text) {
  std::string s(text);
  size_t used = 0;
  long value = 0;
  try {
    value = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || value < 0 || value > 1 << 30)
    throw std::invalid_argument(std::string(name) + "='" + s + "' is not a rank or count");
  return static_cast<int>(value);
}

// The value of `name` as an int, or `fallback` when unset.
int get_int(const EnvLookup& lookup, const char* name, int fallback) {
  const char* value = lookup(name);
  return value == nullptr ? fallback : parse_int(name, value);
}

void check_consistent(const RankEnv& e) {
  std::string who = "the " + e.launcher + " launcher's environment";
  if (e.size < 1 || e.rank >= e.size)
    throw std::invalid_argument(who + " gives rank " + std::to_string(e.rank) + " of world size " +
                                std::to_string(e.size));
  if (e.local_size < 1 || e.local_rank >= e.local_size || e.local_size > e.size)
    throw std::invalid_argument(who + " gives local rank " + std::to_string(e.local_rank) +
                                " of local size " + std::to_string(e.local_size) +
                                " in a world of " + std::to_string(e.size));
}

}  // namespace

int slurm_tasks_on_node(const std::string& tasks_per_node, int node) {
  // Entries are "N" or "N(xR)", comma-separated.
  std::vector<int> counts;
  size_t pos = 0;
  auto bad = [&] {
    return std::invalid_argument("SLURM_STEP_TASKS_PER_NODE='" + tasks_per_node +
                                 "' is not Slurm's N or N(xR) list");
  };
  while (pos < tasks_per_node.size()) {
    size_t end = tasks_per_node.find(',', pos);
    if (end == std::string::npos) end = tasks_per_node.size();
    std::string item = tasks_per_node.substr(pos, end - pos);
    int repeat = 1;
    auto paren = item.find("(x");
    if (paren != std::string::npos) {
      if (item.back() != ')') throw bad();
      repeat = parse_int("SLURM_STEP_TASKS_PER_NODE",
                         item.substr(paren + 2, item.size() - paren - 3).c_str());
      item = item.substr(0, paren);
    }
    if (item.empty()) throw bad();
    int n = parse_int("SLURM_STEP_TASKS_PER_NODE", item.c_str());
    for (int i = 0; i < repeat; ++i) counts.push_back(n);
    pos = end + 1;
  }
  if (node < 0 || node >= static_cast<int>(counts.size()))
    throw std::invalid_argument("SLURM_STEP_TASKS_PER_NODE='" + tasks_per_node +
                                "' has no entry for node " + std::to_string(node));
  return counts[static_cast<size_t>(node)];
}

namespace {

// Where a launcher's rank learns the local size when no variable of the launcher gives it.
enum class LocalSizeElse {
  one,                   // the rank is alone on its node
  world,                 // every rank is on this node
  slurm_tasks_per_node,  // Slurm's per-node task list at SLURM_NODEID, else the world
};

// How one launcher tells a process where it is in the world: one row per launcher.
struct LauncherVars {
  const char* launcher;  // RankEnv::launcher
  const char* marker;    // set by this launcher alone: unset, the process is not its rank
  const char* size;      // the world size; unset, `size_else`, unset 1
  const char* size_else;
  const char* rank;
  const char* local_rank;  // nullptr: the rank (dlhost starts every rank on this node)
  const char* local_size;  // nullptr or unset: `local_size_else`
  LocalSizeElse local_size_else;
};

// dlhost's own `launcher: local`: ranks started by dlhost on this node.
constexpr LauncherVars kLocal{"local", "DLHOST_WORLD_SIZE", "DLHOST_WORLD_SIZE",
                              nullptr, "DLHOST_RANK",       nullptr,
                              nullptr, LocalSizeElse::world};
constexpr LauncherVars kOpenMpi{"openmpi",
                                "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_SIZE",
                                nullptr,
                                "OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_LOCAL_RANK",
                                "OMPI_COMM_WORLD_LOCAL_SIZE",
                                LocalSizeElse::one};
// Only srun sets SLURM_PROCID: inside a bare salloc/sbatch shell SLURM_NTASKS describes the
// allocation, not this process, and must not make it believe it has peers.
constexpr LauncherVars kSlurm{
    "slurm",        "SLURM_PROCID",  "SLURM_NTASKS", "SLURM_NPROCS",
    "SLURM_PROCID", "SLURM_LOCALID", nullptr,        LocalSizeElse::slurm_tasks_per_node};
constexpr LauncherVars kPmi{"pmi",      "PMI_SIZE",        "PMI_SIZE",        nullptr,
                            "PMI_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", LocalSizeElse::world};

int local_size_else(const LauncherVars& v, const EnvLookup& lookup, const RankEnv& e) {
  switch (v.local_size_else) {
    case LocalSizeElse::one:
      return 1;
    case LocalSizeElse::world:
      return e.size;
    case LocalSizeElse::slurm_tasks_per_node:
      break;
  }
  const char* per_node = lookup("SLURM_STEP_TASKS_PER_NODE");
  if (per_node == nullptr) per_node = lookup("SLURM_TASKS_PER_NODE");
  return per_node != nullptr ? slurm_tasks_on_node(per_node, get_int(lookup, "SLURM_NODEID", 0))
                             : e.size;
}

std::optional<RankEnv> read_rank_env(const LauncherVars& v, const EnvLookup& lookup) {
  if (lookup(v.marker) == nullptr) return std::nullopt;
  // The marker is read first, so a bad one is the variable an error names, as before the table.
  get_int(lookup, v.marker, 0);
  RankEnv e;
  e.launcher = v.launcher;
  e.rank = get_int(lookup, v.rank, 0);
  e.size = get_int(lookup, v.size, v.size_else ? get_int(lookup, v.size_else, 1) : 1);
  e.local_rank = v.local_rank ? get_int(lookup, v.local_rank, 0) : e.rank;
  e.local_size = v.local_size ? get_int(lookup, v.local_size, local_size_else(v, lookup, e))
                              : local_size_else(v, lookup, e);
  check_consistent(e);
  return e;
}

}  // namespace

std::optional<RankEnv> local_rank_env(const EnvLookup& lookup) {
  return read_rank_env(kLocal, lookup);
}
std::optional<RankEnv> openmpi_rank_env(const EnvLookup& lookup) {
  return read_rank_env(kOpenMpi, lookup);
}
std::optional<RankEnv> slurm_rank_env(const EnvLookup& lookup) {
  return read_rank_env(kSlurm, lookup);
}
std::optional<RankEnv> pmi_rank_env(const EnvLookup& lookup) { return read_rank_env(kPmi, lookup); }

RankEnv detect_rank_env(const EnvLookup& lookup) {
  // The precedence of rank_env.h; each launcher of launch/launchers.h names its reader above.
  for (auto* read : {local_rank_env, openmpi_rank_env, slurm_rank_env, pmi_rank_env})
    if (std::optional<RankEnv> e = read(lookup)) return *e;
  if (const char* pmix = lookup("PMIX_RANK"))
    throw std::invalid_argument(std::string("PMIX_RANK=") + pmix +
                                " is set but no launcher variable gives the world size "
                                "(OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, PMI_SIZE)");
  return RankEnv{};
}

RankEnv detect_rank_env() {
  return detect_rank_env([](const char* name) { return std::getenv(name); });
}

void die_with_launcher() { prctl(PR_SET_PDEATHSIG, SIGKILL); }

std::string unshared_store_reason() {
  const char* store = std::getenv("DLHOST_STORE");
  if (store != nullptr && *store != '\0') return "";
  RankEnv env;
  try {
    env = detect_rank_env();
  } catch (const std::invalid_argument&) {
    return "";  // the command that reads the ranks reports a bad environment itself
  }
  if (env.size <= 1) return "";
  return "this process is rank " + std::to_string(env.rank) + " of " + std::to_string(env.size) +
         " (launcher " + env.launcher +
         ") but DLHOST_STORE names no rendezvous store shared by the ranks, so each would wait "
         "for keys only the others set. A bare launcher serves no store: a case of `dlhost run` "
         "with "
         "ranks > 1 serves one to its ranks, or use a comm that needs no store (mpi)";
}

}  // namespace dlhost
