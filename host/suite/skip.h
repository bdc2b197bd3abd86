// skip.h — every rule that skips a case on this machine, in one place: a case that needs more
// threads than the machine has cores (decided when the suite loads), and a multi-rank case that
// needs ranks x threads cores on a machine that has fewer and no other hosts to spread to
// (decided by `dlhost run`/`validate`, which know the command line's launcher arguments).
// A case on real data whose data set is not on this machine (decided when the suite loads).
// A name that is not installed (network, backend, comm) is the loader's catalog check.
// Pure functions of their arguments and the environment (SLURM_JOB_ID); thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "suite/suite.h"

namespace dlhost {

// Whether the ranks of a case may run on hosts other than this one: the case or the command line
// gives launcher arguments (a hostfile), dlhost runs inside a Slurm job, the launcher is srun, or
// its interconnect is emulated (test hosts on this machine, which share its cores: oversubscribed).
// Decides both whether a multi-rank case is skipped for this machine's cores and whether the
// rendezvous store listens beyond this host.
bool spans_other_hosts(const nlohmann::ordered_json& params,
                       const std::vector<std::string>& cli_launcher_args);

// "" when the case's threads fit `host_cores` (unknown when <= 0) or it may oversubscribe.
std::string thread_skip_reason(const nlohmann::ordered_json& params, int host_cores);

// "" unless the case has several ranks that need more cores than `host_cores` and may neither
// oversubscribe nor go to other hosts.
std::string rank_skip_reason(const nlohmann::ordered_json& params, int host_cores,
                             const std::vector<std::string>& cli_launcher_args);

// "" for synthetic data or when the case's data set is all there; else why not, naming the path
// (`data: real` with $DLHOST_DATA unset, a directory that is not one, a file of the network's
// data set that is missing). Throws std::invalid_argument when the network trains on no real
// data set: an error of the suite, not of this machine.
std::string data_skip_reason(const nlohmann::ordered_json& params);

// Sets rank_skip_reason on every case that has no skip reason yet.
void apply_rank_skips(Suite& suite, int host_cores,
                      const std::vector<std::string>& cli_launcher_args);

}  // namespace dlhost
