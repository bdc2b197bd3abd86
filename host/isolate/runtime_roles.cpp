// runtime_roles.cpp — see runtime_roles.h: a tool runtime's extra role processes, planned by the
// parent and run by `dlhost runtime-role`.
#include "isolate/runtime_roles.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "dlhost/runtime_cluster.hpp"

#include "core/environment.h"
#include "core/host_api.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "distributed/rank_env.h"
#include "isolate/case_output.h"
#include "isolate/case_process.h"
#include "run/runner.h"
#include "suite/case_params.h"
#include "suite/skip.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;

// The command name of a role process (runtime-role's own, checked by tests).
constexpr const char* kSubcommand = "runtime-role";

}  // namespace

int CaseRuntimeRoles::processes() const {
  int n = 0;
  for (const RuntimeRoleCount& c : counts) n += c.count;
  return n;
}

std::vector<int> pick_free_ports(int count) {
  std::vector<int> fds, ports;
  auto close_all = [&fds] {
    for (int fd : fds) close(fd);
  };
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      const int err = errno;
      close_all();
      throw std::runtime_error(std::string("cannot pick a port: socket: ") + std::strerror(err));
    }
    fds.push_back(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      const int err = errno;
      close_all();
      throw std::runtime_error(std::string("cannot pick a port: bind: ") + std::strerror(err));
    }
    ports.push_back(ntohs(a.sin_port));
  }
  close_all();
  return ports;
}

RuntimeRolePlan plan_runtime_roles(const std::string& exe, const CaseJob& job,
                                   const CaseRuntimeRoles& roles, const TestHosts* hosts, int slots,
                                   const std::vector<std::string>& cli_launcher_args) {
  RuntimeRolePlan plan;
  if (roles.counts.empty()) return plan;
  const CaseParams keys = case_params(job.input.params, job.input.source);
  const int ranks = static_cast<int>(keys.ranks);
  if (hosts == nullptr && ranks > 1 && spans_other_hosts(keys, cli_launcher_args))
    throw std::runtime_error(
        "the runtime's extra roles need every worker's address up front, and the launcher may "
        "place the ranks on other machines: run it on this machine or on test hosts "
        "(interconnect)");
  const std::vector<int> ports = pick_free_ports(ranks + roles.processes());
  size_t next_port = 0;
  sdk::RuntimeCluster cluster;
  const int per_host = std::max(slots, 1);
  for (int r = 0; r < ranks; ++r)
    cluster["worker"].push_back(
        {hosts ? hosts->host_address(r / per_host) : "127.0.0.1", ports[next_port++]});
  // The hosts the ranks fill; the role processes take the ones after them, one each.
  int next_host = hosts ? (ranks + per_host - 1) / per_host : 0;
  struct Place {
    std::vector<std::string> run_under;
    std::string where;
  };
  std::vector<std::vector<Place>> places;
  for (const RuntimeRoleCount& c : roles.counts) {
    const std::string name = sdk::runtime_role_name(c.role);
    if (name.empty())
      throw std::runtime_error("the runtime asked for role " + std::to_string(c.role) +
                               ", which this dlhost does not know");
    places.emplace_back();
    for (int i = 0; i < c.count; ++i) {
      Place place{{}, "this machine"};
      std::string address = "127.0.0.1";
      if (hosts != nullptr && next_host < hosts->hosts()) {
        place = {hosts->run_on_host(next_host), hosts->host_text(next_host)};
        address = hosts->host_address(next_host++);
      } else if (hosts != nullptr) {
        address = hosts->parent_address();  // where the workers on test hosts reach this machine
      }
      cluster[name].push_back({address, ports[next_port++]});
      places.back().push_back(place);
    }
  }
  plan.cluster = sdk::format_runtime_cluster(cluster);
  CaseJob role_job = job;
  role_job.runtime_cluster = plan.cluster;
  const std::string role_json = job_to_json(role_job).dump();
  for (size_t k = 0; k < roles.counts.size(); ++k) {
    const RuntimeRoleCount& c = roles.counts[k];
    RoleSpec spec;
    spec.role = sdk::runtime_role_name(c.role);
    spec.count = c.count;
    spec.command = {exe, kSubcommand, role_json};
    for (int i = 0; i < c.count; ++i) {
      spec.run_under.push_back(places[k][i].run_under);
      plan.placement.push_back({{"role", spec.role},
                                {"index", i},
                                {"listens", cluster[spec.role][i].text()},
                                {"host", places[k][i].where}});
    }
    plan.roles.push_back(std::move(spec));
  }
  return plan;
}

json add_runtime_roles(CaseJob& job, CaseLimits& launch, const TestHosts* hosts) {
  if (!launch.runtime_roles.refused.empty())
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, launch.runtime_roles.refused);
  if (launch.runtime_roles.counts.empty()) return json::array();
  RuntimeRolePlan plan;
  try {
    plan = plan_runtime_roles(
        self_exe(), job, launch.runtime_roles, hosts,
        static_cast<int>(case_params(job.input.params, job.input.source).ranks_per_node),
        launch.launcher_args);
  } catch (const std::exception& e) {
    throw Error(DLHOST_CODE_FAILED_PRECONDITION, e.what());
  }
  job.runtime_cluster = plan.cluster;
  launch.extra_roles.insert(launch.extra_roles.end(), plan.roles.begin(), plan.roles.end());
  return plan.placement;
}

std::string with_roles_output(const std::string& tail, const std::string& roles_output) {
  std::string roles;
  {
    std::ifstream in(roles_output, std::ios::binary);
    if (in) roles.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::remove(roles_output.c_str());
  if (roles.empty()) return tail;
  const std::string header = "--- the extra roles' output ---\n";
  const size_t room = kStderrTailBytes - header.size();
  const size_t roles_room = tail.empty() ? room : std::min(roles.size(), room / 2);
  roles = roles.substr(roles.size() - std::min(roles.size(), roles_room));
  std::string ranks = tail.substr(tail.size() - std::min(tail.size(), room - roles.size()));
  if (!ranks.empty() && ranks.back() != '\n') ranks += '\n';
  return ranks + header + roles;
}

int runtime_role_main(const std::string& job_json) {
  const char* role_name = std::getenv("DLHOST_ROLE");
  const char* index_text = std::getenv("DLHOST_ROLE_INDEX");
  const int32_t role = role_name ? sdk::runtime_role_value(role_name) : 0;
  if (role == 0 || role == DLHOST_RUNTIME_WORKER || index_text == nullptr) {
    std::fprintf(stderr,
                 "dlhost runtime-role: DLHOST_ROLE (ps, scheduler) and DLHOST_ROLE_INDEX must be "
                 "set (dlhost sets them for a case's extra roles)\n");
    return 2;
  }
  const std::string who = std::string(role_name) + " " + index_text;
  die_with_launcher();
  try {
    CaseJob job = job_from_json(nlohmann::json::parse(job_json));
    PluginRegistry registry;
    if (job.plugin_files.empty())
      registry.discover(job.plugin_folders, [&](const auto&) { return job.unsafe_plugins; });
    for (const auto& file : job.plugin_files) registry.load_file(file);
    std::vector<NetworkRef> networks = list_networks(registry);
    RunContext ctx;
    ctx.registry = &registry;
    ctx.networks = &networks;
    ctx.runtime_cluster = job.runtime_cluster;
    serve_runtime_role(job.input, ctx, role, std::atoi(index_text));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost runtime-role %s: %s\n", who.c_str(), e.what());
    std::fflush(nullptr);
    _exit(1);
  }
  // Without the libraries' exit handlers: a server's (TensorFlow's cannot stop at all, MXNet's
  // engine and ps-lite threads) may crash at exit after its part is done.
  std::fflush(nullptr);
  _exit(0);
}

}  // namespace dlhost
