// skip.cpp — see skip.h.
#include "suite/skip.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "suite/schema.h"

namespace dlhost {

using ordered_json = nlohmann::ordered_json;

bool spans_other_hosts(const ordered_json& params,
                       const std::vector<std::string>& cli_launcher_args) {
  auto args = params.find("launcher_args");
  return (args != params.end() && args->is_array() && !args->empty()) ||
         !cli_launcher_args.empty() || std::getenv("SLURM_JOB_ID") != nullptr ||
         case_value<std::string>(params, "launcher") == "srun" ||
         case_value_if<std::string>(params, "interconnect").value_or("loopback") != "loopback";
}

std::string thread_skip_reason(const ordered_json& params, int host_cores) {
  const int64_t threads = case_value<int64_t>(params, "threads");
  if (host_cores <= 0 || threads <= host_cores || case_value<bool>(params, "oversubscribe"))
    return "";
  return "needs " + std::to_string(threads) + " threads; this machine has " +
         std::to_string(host_cores) + " cores";
}

std::string rank_skip_reason(const ordered_json& params, int host_cores,
                             const std::vector<std::string>& cli_launcher_args) {
  const int64_t ranks = case_value<int64_t>(params, "ranks");
  const int64_t threads = std::max<int64_t>(case_value<int64_t>(params, "threads"), 1);
  const int64_t need = ranks * threads;
  if (ranks <= 1 || host_cores <= 0 || need <= host_cores ||
      case_value<bool>(params, "oversubscribe") || spans_other_hosts(params, cli_launcher_args))
    return "";
  return "needs " + std::to_string(need) + " cores (" + std::to_string(ranks) + " ranks x " +
         std::to_string(threads) + " threads); this machine has " + std::to_string(host_cores) +
         " (run it under Slurm or with a hostfile)";
}

void apply_rank_skips(Suite& suite, int host_cores,
                      const std::vector<std::string>& cli_launcher_args) {
  for (CaseSpec& c : suite.cases)
    if (c.skip_reason.empty())
      c.skip_reason = rank_skip_reason(c.params, host_cores, cli_launcher_args);
}

}  // namespace dlhost
