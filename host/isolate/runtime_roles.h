// runtime_roles.h — the extra role processes of a case whose comm is a tool's own runtime with
// roles (ABI 1.5's runtime_roles: MXNet's scheduler and servers, TensorFlow's ps tasks). dlhost
// asks the backend which roles and how many (app/run_command.cpp, before the case starts), picks
// a port for every worker and every role process, hands the whole cluster to each (the worker's
// job and the role's), and starts each role as dlhost's own executable in the hidden subcommand
// `dlhost runtime-role JOB_JSON` (arguments only, no shell), which loads the case's plugins and
// runs the backend's runtime_serve. The processes are the case's extra roles
// (CaseLimits::extra_roles, launch/roles.h): a dead role ends the case named, none is left
// behind, their output is kept for the record's stderr tail. Under test hosts each role process
// runs on a test host of its own (the case makes one more host per role process); the record's
// `runtime_roles` says where each ran.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "isolate/case_job.h"
#include "launch/launchers.h"
#include "launch/test_hosts.h"
#include "suite/tool_runtimes.h"

namespace dlhost {

// What the parent learned from the backend before the case starts (CaseLimits::runtime_roles).
struct CaseRuntimeRoles {
  std::vector<RuntimeRoleCount> counts;  // empty: the case has no extra roles of its runtime
  std::string refused;  // the backend's refusal of the case's options: the case FAILS with it
  int processes() const;
};

// The roles of a case: the RoleSpecs to start, the cluster text every process gets, and for the
// record where each role process runs.
struct RuntimeRolePlan {
  std::vector<RoleSpec> roles;
  std::string cluster;
  nlohmann::ordered_json placement = nlohmann::ordered_json::array();
};

// `count` distinct ports free on this machine now (each bound to port 0, all held until every
// one is known, then released). Throws std::runtime_error when a socket cannot be bound.
std::vector<int> pick_free_ports(int count);

// The plan for `job` (its ranks run under `hosts` when not null: ranks fill the first hosts,
// `slots` to a host; each role process takes the next host while there are any, else runs on
// this machine at the hosts' parent address; `cli_launcher_args`: the command line's launcher
// arguments, which may place ranks elsewhere). Role commands are `exe runtime-role JOB_JSON` with
// the cluster set in that job. Throws std::runtime_error when the workers' addresses are unknown
// (ranks on other machines without test hosts) or no ports can be had.
RuntimeRolePlan plan_runtime_roles(const std::string& exe, const CaseJob& job,
                                   const CaseRuntimeRoles& roles, const TestHosts* hosts, int slots,
                                   const std::vector<std::string>& cli_launcher_args);

struct CaseLimits;

// Plans the case's tool runtime roles (launch.runtime_roles) on `hosts` (or this machine): sets
// job.runtime_cluster, adds the role processes to launch.extra_roles and returns where each runs
// (the record's `runtime_roles`; empty when the case has none). Throws Error with the backend's
// refusal (INVALID_ARGUMENT), or when the roles cannot be planned (FAILED_PRECONDITION): the
// case FAILS with it.
nlohmann::ordered_json add_runtime_roles(CaseJob& job, CaseLimits& launch, const TestHosts* hosts);

// The record's stderr tail of a case: the ranks' `tail`, and the extra roles' output from the
// file `roles_output` (which is removed) after a header line, each part trimmed so that both fit
// the record's tail (the roles' half at most when the ranks said something).
std::string with_roles_output(const std::string& tail, const std::string& roles_output);

// `dlhost runtime-role JOB_JSON`: one process of an extra role (DLHOST_ROLE, DLHOST_ROLE_INDEX,
// as launch/roles.h sets them). Exits 0 when the backend's serve returned, 1 with the reason on
// stderr when it failed (both through _exit: no library's exit handler runs), and returns 2 for a
// bad invocation.
int runtime_role_main(const std::string& job_json);

}  // namespace dlhost
