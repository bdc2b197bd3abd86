// skip.h — every rule that skips a case on this machine, in one place: a case that needs more
// threads than the machine has cores (decided when the suite loads); a case on real data whose
// data set is not on this machine (when the suite loads); and, decided by `dlhost run`/`validate`
// before any rank process starts (they know the command line's launcher arguments and what the
// plugin registry reports): a case on a GPU backend that needs more GPUs than the backend sees
// here, a multi-rank case on a CPU backend that needs ranks x threads cores on a machine that has
// fewer and no other hosts to spread to, and `comm_memory: device` on a comm that takes host
// memory only (an MPI that is not CUDA-aware). A name that is not installed (network, backend,
// comm) is the loader's catalog check.
// Pure functions of their arguments and the environment (SLURM_JOB_ID); thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "suite/case_params.h"
#include "suite/suite.h"

namespace dlhost {

// Whether the ranks of a case may run on hosts other than this one: its launcher is not `local`
// and the case or the command line gives launcher arguments (a hostfile), dlhost runs inside a
// Slurm job, or the launcher is srun; or its interconnect is emulated (test hosts on this machine,
// which share its cores: oversubscribed). Decides both whether a multi-rank case is skipped for
// this machine's cores and whether the rendezvous store listens beyond this host.
bool spans_other_hosts(const CaseParams& params, const std::vector<std::string>& cli_launcher_args);

// "" when the case's threads fit `host_cores` (unknown when <= 0) or it may oversubscribe.
std::string thread_skip_reason(const CaseParams& params, int host_cores);

// "" unless the case has several ranks that need more cores than `host_cores` and may neither
// oversubscribe nor go to other hosts.
std::string rank_skip_reason(const CaseParams& params, int host_cores,
                             const std::vector<std::string>& cli_launcher_args);

// "" for synthetic data or when the case's data set is all there; else why not, naming the path
// (`data: real` with $DLHOST_DATA unset, a directory that is not one, a file of the network's
// data set that is missing). Throws std::invalid_argument when the network trains on no real
// data set: an error of the suite, not of this machine.
std::string data_skip_reason(const CaseParams& params);

// A backend's devices as its plugin reports them before any case runs (run/machine_facts.h fills
// it from the plugin registry).
struct BackendDevices {
  // Its devices are GPUs (dlhost_device_info.kind). A backend whose query says it cannot run here
  // (no driver) reports no device: it counts as a GPU backend when it keeps its parameters in
  // device memory, with 0 GPUs.
  bool gpu = false;
  bool device_memory = false;  // its parameters and gradients live in device memory
  int32_t gpus = 0;            // GPU devices it sees here
  std::string why_none;        // gpus == 0: why (the query's reason), else ""
};

// What a comm takes, from its capabilities before init (a comm must say it without starting).
struct CommMemory {
  bool device_memory = false;  // accepts device buffers (NCCL, a CUDA-aware MPI)
  std::string library;         // "Open MPI v4.1.4, ...": named in the reason
};

// What this machine offers the cases beyond the suite: its cores, and per backend or comm name
// what the plugin registry knows (nullopt: not installed here, or for a comm: not usable here;
// the catalog check and the case's own run say why). Unset functions: nothing known.
struct MachineFacts {
  int cores = 0;
  std::function<std::optional<BackendDevices>(const std::string& backend)> backend;
  std::function<std::optional<CommMemory>(const std::string& comm)> comm;
};

// "" when `gpus` GPUs are enough for `need`; else "needs 4 GPUs (4 ranks on one node); this
// machine has 0 GPUs visible to gpu_cudnn: <why>". `because` says where the need comes from,
// `where` names the place counted ("this machine", "this node"). One text for the check before
// the ranks start and the one each rank makes on its node.
std::string gpu_shortfall(int64_t need, const std::string& because, const std::string& where,
                          const std::string& backend, const BackendDevices& devices);

// "" unless the case is on a GPU backend and needs more GPUs than it sees here: one per rank on
// this machine (all ranks, unless they may go to other hosts: then each node's ranks check their
// own node when they start), or GPUs 0..d when the suite names device d for all its ranks.
std::string gpu_skip_reason(const CaseParams& params, const BackendDevices& devices,
                            const std::vector<std::string>& cli_launcher_args);

// Why comm `comm` (`library`) cannot take a device backend's gradients in device memory, for
// `comm_memory: device`. One text for the skip here and the refusal after the comm's init.
std::string device_memory_refusal(const std::string& comm, const std::string& library);

// "" unless the case asks `comm_memory: device` for a device-memory backend and its comm takes
// host memory only.
std::string comm_memory_skip_reason(const CaseParams& params, const BackendDevices& devices,
                                    const CommMemory& comm);

// Every rule above that needs the plugin registry, for one case: the GPU rule for a GPU backend
// (in place of the core rule: its ranks' limit is GPUs, each rank's host thread mostly waits on
// its GPU), the core rule otherwise, then the comm-memory rule; reasons joined with "; ".
std::string machine_skip_reason(const CaseParams& params, const MachineFacts& facts,
                                const std::vector<std::string>& cli_launcher_args);

// Sets machine_skip_reason on every case that has no skip reason yet.
void apply_rank_skips(Suite& suite, const MachineFacts& facts,
                      const std::vector<std::string>& cli_launcher_args);

}  // namespace dlhost
