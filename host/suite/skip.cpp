// skip.cpp — see skip.h.
#include "suite/skip.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <optional>
#include <stdexcept>
#include <utility>

#include "data/catalog.h"
#include "data/error.h"
#include "launch/launchers.h"

namespace dlhost {

namespace {

// The launcher may place the ranks on machines other than this one, as its object says
// (launch/launchers.h): mpirun with launcher arguments (a hostfile; the case's or the command
// line's) or inside a Slurm job, srun always, `launcher: local` never.
bool may_leave_this_machine(const CaseParams& params,
                            const std::vector<std::string>& cli_launcher_args) {
  const Launcher& launcher = launcher_named(params.launcher);
  PlacementFacts facts;
  facts.launcher_args = !params.launcher_args.empty() || !cli_launcher_args.empty();
  facts.slurm_job = std::getenv("SLURM_JOB_ID") != nullptr;
  return launcher.may_leave_this_machine(facts);
}

std::string count_of(int64_t n, const char* thing) {
  return std::to_string(n) + " " + thing + (n == 1 ? "" : "s");
}

// The ranks of the case that run on this machine; nullopt when they may go to other hosts whose
// GPUs this machine cannot count. Emulated interconnects put every test host on this machine.
std::optional<int64_t> ranks_here(const CaseParams& params,
                                  const std::vector<std::string>& cli_launcher_args) {
  const int64_t ranks = params.ranks;
  if (ranks <= 1) return ranks;  // one rank runs here, without a launcher
  if (may_leave_this_machine(params, cli_launcher_args)) return std::nullopt;
  return ranks;
}

}  // namespace

bool spans_other_hosts(const CaseParams& params,
                       const std::vector<std::string>& cli_launcher_args) {
  return may_leave_this_machine(params, cli_launcher_args) || params.interconnect != "loopback";
}

std::string thread_skip_reason(const CaseParams& params, int host_cores) {
  const int64_t threads = params.threads;
  if (host_cores <= 0 || threads <= host_cores || params.oversubscribe) return "";
  return "needs " + std::to_string(threads) + " threads; this machine has " +
         std::to_string(host_cores) + " cores";
}

std::string rank_skip_reason(const CaseParams& params, int host_cores,
                             const std::vector<std::string>& cli_launcher_args) {
  const int64_t ranks = params.ranks;
  const int64_t threads = std::max<int64_t>(params.threads, 1);
  const int64_t need = ranks * threads;
  if (ranks <= 1 || host_cores <= 0 || need <= host_cores || params.oversubscribe ||
      spans_other_hosts(params, cli_launcher_args))
    return "";
  return "needs " + std::to_string(need) + " cores (" + std::to_string(ranks) + " ranks x " +
         std::to_string(threads) + " threads); this machine has " + std::to_string(host_cores) +
         " (run it under Slurm or with a hostfile)";
}

std::string data_skip_reason(const CaseParams& params) {
  const std::string& data = params.data;
  if (data == "synthetic") {
    if (params.evaluate)
      throw std::invalid_argument("'evaluate: true' needs real data (data: real or a directory)");
    if (params.epochs > 0)
      throw std::invalid_argument("'epochs' needs real data (data: real or a directory)");
    return "";
  }
  const std::string& network = params.network;
  const auto family = data::family_for_network(network);
  if (!family)
    throw std::invalid_argument("network '" + network +
                                "' trains on synthetic data only: 'data' must be synthetic "
                                "(real data: fcnr, lenet, autoencoder on MNIST; alexnet_r, "
                                "resnet56 on CIFAR-10; lstm_ptb on PTB)");
  try {
    data::find_files(*family, data::resolve_data_dir(data == "real" ? "" : data));
  } catch (const data::DataError& e) {
    return std::string("real data: ") + e.what();
  }
  return "";
}

std::string gpu_shortfall(int64_t need, const std::string& because, const std::string& where,
                          const std::string& backend, const BackendDevices& devices) {
  if (need <= devices.gpus) return "";
  std::string why = "needs " + count_of(need, "GPU") + " (" + because + "); " + where + " has " +
                    count_of(devices.gpus, "GPU") + " visible to " + backend;
  if (devices.gpus == 0 && !devices.why_none.empty()) why += ": " + devices.why_none;
  return why;
}

std::string gpu_skip_reason(const CaseParams& params, const BackendDevices& devices,
                            const std::vector<std::string>& cli_launcher_args) {
  if (!devices.gpu) return "";
  const std::string& backend = params.backend;
  // A suite that names the device puts every rank of the node on it (shared on purpose).
  if (const std::optional<int64_t>& d = params.device)
    return gpu_shortfall(*d + 1, "device: " + std::to_string(*d), "this machine", backend, devices);
  const std::optional<int64_t> ranks = ranks_here(params, cli_launcher_args);
  if (!ranks) return "";
  return gpu_shortfall(*ranks, count_of(*ranks, "rank") + " on one node", "this machine", backend,
                       devices);
}

std::string device_memory_refusal(const std::string& comm, const std::string& library) {
  return "comm_memory: device, but comm '" + comm + "'" +
         (library.empty() ? "" : " (" + library + ")") +
         " does not take device memory here (not CUDA-aware); comm_memory: host stages the "
         "gradients through host memory instead";
}

std::string comm_memory_skip_reason(const CaseParams& params, const BackendDevices& devices,
                                    const CommMemory& comm) {
  const std::string& name = params.comm;
  if (name == "none" || !devices.device_memory || comm.device_memory ||
      params.comm_memory != "device")
    return "";
  return device_memory_refusal(name, comm.library);
}

std::string machine_skip_reason(const CaseParams& params, const MachineFacts& facts,
                                const std::vector<std::string>& cli_launcher_args) {
  std::optional<BackendDevices> devices;
  if (facts.backend && !params.backend.empty()) devices = facts.backend(params.backend);
  std::vector<std::string> reasons;
  auto add = [&](std::string why) {
    if (!why.empty()) reasons.push_back(std::move(why));
  };
  // A GPU case's ranks each drive a GPU and mostly wait on it: GPUs are its limit, not cores.
  if (devices && devices->gpu)
    add(gpu_skip_reason(params, *devices, cli_launcher_args));
  else
    add(rank_skip_reason(params, facts.cores, cli_launcher_args));
  const std::string& comm = params.comm;
  if (devices && facts.comm && comm != "none")
    if (auto memory = facts.comm(comm)) add(comm_memory_skip_reason(params, *devices, *memory));
  std::string joined;
  for (const auto& why : reasons) joined += (joined.empty() ? "" : "; ") + why;
  return joined;
}

void apply_rank_skips(Suite& suite, const MachineFacts& facts,
                      const std::vector<std::string>& cli_launcher_args) {
  for (CaseSpec& c : suite.cases)
    if (c.skip_reason.empty())
      c.skip_reason =
          machine_skip_reason(case_params(c.params, c.source), facts, cli_launcher_args);
}

}  // namespace dlhost
