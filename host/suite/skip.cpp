// skip.cpp — see skip.h.
#include "suite/skip.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <stdexcept>

#include "data/catalog.h"
#include "data/error.h"
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

std::string data_skip_reason(const ordered_json& params) {
  const std::string data = case_value<std::string>(params, "data");
  if (data == "synthetic") {
    if (case_value<bool>(params, "evaluate"))
      throw std::invalid_argument("'evaluate: true' needs real data (data: real or a directory)");
    if (case_value<int64_t>(params, "epochs") > 0)
      throw std::invalid_argument("'epochs' needs real data (data: real or a directory)");
    return "";
  }
  const std::string network = case_value_if<std::string>(params, "network").value_or("");
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

void apply_rank_skips(Suite& suite, int host_cores,
                      const std::vector<std::string>& cli_launcher_args) {
  for (CaseSpec& c : suite.cases)
    if (c.skip_reason.empty())
      c.skip_reason = rank_skip_reason(c.params, host_cores, cli_launcher_args);
}

}  // namespace dlhost
