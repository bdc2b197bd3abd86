// rank_env.h — which rank of how many this process is, read from the launcher's
// environment (mpirun, srun, MPICH's hydra, or dlhost's own `launcher: local`), for every command
// that starts a comm: `comm-bench` and the ranks of a data-parallel `run` case (case-worker). The
// host never links MPI, so the environment is the only place it can learn its rank before a comm
// plugin is initialized.
//
// Thread-safety: detect_rank_env() reads the environment (getenv), the parser is pure.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace dlhost {

struct RankEnv {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // rank among the processes of this node
  int local_size = 1;
  // "none" (no launcher: a world of 1), "local" (dlhost started the ranks itself), "openmpi"
  // (mpirun/mpiexec/prterun of Open MPI, also when started inside a Slurm allocation), "slurm"
  // (srun), "pmi" (MPICH hydra, Intel MPI).
  std::string launcher = "none";
};

// Looks a variable up; returns NULL when it is not set.
using EnvLookup = std::function<const char*(const char*)>;

// Precedence: dlhost's own DLHOST_RANK/DLHOST_WORLD_SIZE (launcher: local), then Open MPI's
// OMPI_COMM_WORLD_* (they describe the MPI world even under salloc),
// then Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun; the local size from
// SLURM_STEP_TASKS_PER_NODE at SLURM_NODEID), then PMI_RANK/PMI_SIZE. PMIX_RANK alone (a PMIx
// launcher that publishes no world size) is an error, as is a rank outside its world or a
// variable that is not a number: std::invalid_argument naming the variable.
RankEnv detect_rank_env(const EnvLookup& lookup);
RankEnv detect_rank_env();  // from the process environment

// One launcher's variables each, nullopt when that launcher's marker variable is unset (same
// errors as above). The launchers of launch/launchers.h each name theirs; detect_rank_env() tries
// them in the precedence above. Detection stays here, under core, and not in launch/: core's
// store service (unshared_store_reason) and handles.h read the rank environment, and launch sits
// above core, so moving it up would make a circle.
std::optional<RankEnv> local_rank_env(const EnvLookup& lookup);    // DLHOST_WORLD_SIZE
std::optional<RankEnv> openmpi_rank_env(const EnvLookup& lookup);  // OMPI_COMM_WORLD_SIZE
std::optional<RankEnv> slurm_rank_env(const EnvLookup& lookup);    // SLURM_PROCID
std::optional<RankEnv> pmi_rank_env(const EnvLookup& lookup);      // PMI_SIZE

// Makes this process, a rank, die (SIGKILL) with the process that started it: mpirun, Open
// MPI's orted, srun's step daemon, or dlhost. A launcher killed outright cannot end its ranks,
// and a rank left waiting in a collective waits forever. Called first thing by every rank:
// `case-worker` and `comm-bench` under a launcher.
void die_with_launcher();

// Why this process cannot use the rendezvous store ("" when it can): it is a rank of several
// (from the launcher's environment) and DLHOST_STORE names no store they share, so each rank
// would wait on a store of its own for keys only the others set.
std::string unshared_store_reason();

// Expands Slurm's compressed task counts ("2(x3),1" -> 2,2,2,1) and returns entry `node`;
// throws std::invalid_argument when the text is malformed or has no such entry.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node);

}  // namespace dlhost
