// test_runtime_roles.cpp — a tool runtime's extra roles (ABI 1.5 runtime_roles / runtime_serve,
// issue 41): the cluster text the host hands every process (sdk/runtime_cluster.hpp), the ports
// it picks, the plan of role processes (`dlhost runtime-role JOB` with the cluster in the job),
// a refusal that fails the case, and the roles' output in the record's stderr tail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include "dlhost/runtime_cluster.hpp"
#include "isolate/case_output.h"
#include "isolate/case_process.h"
#include "isolate/runtime_roles.h"

namespace dlhost {
namespace {

using json = nlohmann::ordered_json;

TEST(runtime_cluster, RoleNamesAndValuesMatch) {
  EXPECT_EQ(sdk::runtime_role_name(DLHOST_RUNTIME_WORKER), "worker");
  EXPECT_EQ(sdk::runtime_role_name(DLHOST_RUNTIME_PARAMETER_SERVER), "ps");
  EXPECT_EQ(sdk::runtime_role_name(DLHOST_RUNTIME_SCHEDULER), "scheduler");
  EXPECT_EQ(sdk::runtime_role_name(7), "");
  for (int32_t r :
       {DLHOST_RUNTIME_WORKER, DLHOST_RUNTIME_PARAMETER_SERVER, DLHOST_RUNTIME_SCHEDULER})
    EXPECT_EQ(sdk::runtime_role_value(sdk::runtime_role_name(r)), r);
  EXPECT_EQ(sdk::runtime_role_value("server"), 0);
}

TEST(runtime_cluster, FormatsWorkersFirstAndParsesBack) {
  sdk::RuntimeCluster c;
  c["scheduler"] = {{"127.0.0.1", 40104}};
  c["worker"] = {{"10.213.5.2", 40101}, {"10.213.5.3", 40102}};
  c["ps"] = {{"10.213.5.4", 40103}};
  const std::string text = sdk::format_runtime_cluster(c);
  EXPECT_EQ(text,
            "worker=10.213.5.2:40101,10.213.5.3:40102;ps=10.213.5.4:40103;"
            "scheduler=127.0.0.1:40104");
  const sdk::RuntimeCluster back = sdk::parse_runtime_cluster(text);
  ASSERT_EQ(back.at("worker").size(), 2u);
  EXPECT_EQ(back.at("worker")[1].address, "10.213.5.3");
  EXPECT_EQ(back.at("worker")[1].port, 40102);
  EXPECT_EQ(back.at("ps")[0].text(), "10.213.5.4:40103");
  EXPECT_EQ(back.at("scheduler")[0].port, 40104);
  EXPECT_EQ(sdk::format_runtime_cluster(back), text);
  EXPECT_TRUE(sdk::parse_runtime_cluster("").empty());
}

TEST(runtime_cluster, BadTextIsRefusedSayingWhat) {
  auto why = [](const std::string& text) {
    try {
      sdk::parse_runtime_cluster(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(why("server=127.0.0.1:1").find("unknown role 'server'"), std::string::npos);
  EXPECT_NE(why("worker=a:1;worker=b:2").find("role 'worker' given twice"), std::string::npos);
  EXPECT_NE(why("worker=127.0.0.1").find("is not ADDRESS:PORT"), std::string::npos);
  EXPECT_NE(why("worker=127.0.0.1:").find("is not ADDRESS:PORT"), std::string::npos);
  EXPECT_NE(why("worker=a:0").find("bad port"), std::string::npos);
  EXPECT_NE(why("worker=a:70000").find("bad port"), std::string::npos);
  EXPECT_NE(why("worker=a:12x").find("bad port"), std::string::npos);
  EXPECT_NE(why("worker").find("is not NAME=ADDRESS:PORT"), std::string::npos);
}

TEST(runtime_roles, PickedPortsAreDistinctAndUsable) {
  const std::vector<int> ports = pick_free_ports(5);
  ASSERT_EQ(ports.size(), 5u);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 5u);
  for (int p : ports) EXPECT_GT(p, 0);
}

CaseJob job_of(int ranks) {
  CaseJob job;
  job.input.id = "c1";
  job.input.params =
      json{{"ranks", ranks},      {"launcher", "local"}, {"backend", "cpu_mxnet"},
           {"comm", "torch_ddp"}, {"network", "fcnr"},   {"interconnect", "loopback"}};
  job.plugin_files = {"/plugins/libdlhost_cpu_mxnet.so"};
  return job;
}

TEST(runtime_roles, APlanGivesEveryProcessAPortAndEachRoleDlhostsOwnSubcommand) {
  CaseRuntimeRoles roles;
  roles.counts = {{DLHOST_RUNTIME_PARAMETER_SERVER, 2}, {DLHOST_RUNTIME_SCHEDULER, 1}};
  EXPECT_EQ(roles.processes(), 3);
  const RuntimeRolePlan plan = plan_runtime_roles("/bin/dlhost", job_of(2), roles, nullptr, 1, {});
  const sdk::RuntimeCluster cluster = sdk::parse_runtime_cluster(plan.cluster);
  ASSERT_EQ(cluster.at("worker").size(), 2u);
  ASSERT_EQ(cluster.at("ps").size(), 2u);
  ASSERT_EQ(cluster.at("scheduler").size(), 1u);
  std::set<int> ports;
  for (const auto& [name, list] : cluster)
    for (const auto& e : list) {
      EXPECT_EQ(e.address, "127.0.0.1") << name;
      ports.insert(e.port);
    }
  EXPECT_EQ(ports.size(), 5u);
  ASSERT_EQ(plan.roles.size(), 2u);
  EXPECT_EQ(plan.roles[0].role, "ps");
  EXPECT_EQ(plan.roles[0].count, 2);
  EXPECT_EQ(plan.roles[1].role, "scheduler");
  for (const RoleSpec& r : plan.roles) {
    // Arguments only, no shell: dlhost itself, the hidden subcommand, the job with the cluster.
    ASSERT_EQ(r.command.size(), 3u);
    EXPECT_EQ(r.command[0], "/bin/dlhost");
    EXPECT_EQ(r.command[1], "runtime-role");
    const CaseJob back = job_from_json(nlohmann::json::parse(r.command[2]));
    EXPECT_EQ(back.runtime_cluster, plan.cluster);
    EXPECT_EQ(back.plugin_files, job_of(2).plugin_files);
    for (const auto& under : r.run_under) EXPECT_TRUE(under.empty());  // on this machine
  }
  ASSERT_EQ(plan.placement.size(), 3u);
  EXPECT_EQ(plan.placement[1]["role"], "ps");
  EXPECT_EQ(plan.placement[1]["index"], 1);
  EXPECT_EQ(plan.placement[1]["listens"], cluster.at("ps")[1].text());
  EXPECT_EQ(plan.placement[2]["host"], "this machine");
}

TEST(runtime_roles, NoRolesNoPlan) {
  const RuntimeRolePlan plan = plan_runtime_roles("/bin/dlhost", job_of(2), {}, nullptr, 1, {});
  EXPECT_TRUE(plan.roles.empty());
  EXPECT_EQ(plan.cluster, "");
}

TEST(runtime_roles, WorkersOnOtherMachinesWithoutTestHostsAreRefused) {
  CaseRuntimeRoles roles;
  roles.counts = {{DLHOST_RUNTIME_PARAMETER_SERVER, 1}};
  CaseJob job = job_of(2);
  job.input.params["launcher"] = "mpirun";
  try {
    plan_runtime_roles("/bin/dlhost", job, roles, nullptr, 1, {"--hostfile", "hosts"});
    FAIL() << "planned";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("need every worker's address up front"), std::string::npos)
        << e.what();
  }
}

TEST(runtime_roles, TheCaseGetsTheClusterAndTheRolesOrTheBackendsRefusal) {
  CaseJob job = job_of(1);
  CaseLimits launch;
  launch.extra_roles = {RoleSpec{"hook", 1, {"true"}, {}, {}}};
  launch.runtime_roles.counts = {{DLHOST_RUNTIME_SCHEDULER, 1}};
  const json places = add_runtime_roles(job, launch, nullptr);
  EXPECT_EQ(places.size(), 1u);
  ASSERT_EQ(launch.extra_roles.size(), 2u);  // the test hook's role is kept
  EXPECT_EQ(launch.extra_roles[1].role, "scheduler");
  EXPECT_EQ(job.runtime_cluster.rfind("worker=127.0.0.1:", 0), 0u) << job.runtime_cluster;
  EXPECT_EQ(job_from_json(nlohmann::json::parse(job_to_json(job).dump())).runtime_cluster,
            job.runtime_cluster);

  CaseJob refused_job = job_of(2);
  CaseLimits refused;
  refused.runtime_roles.refused = "mxnet_kvstore: servers=0 is not a count";
  try {
    add_runtime_roles(refused_job, refused, nullptr);
    FAIL() << "not refused";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "mxnet_kvstore: servers=0 is not a count");
  }
}

TEST(runtime_roles, TheRolesOutputJoinsTheTailAndItsFileIsRemoved) {
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("dlhost-test-roles-" + std::to_string(getpid()) + ".log"))
                               .string();
  EXPECT_EQ(with_roles_output("rank tail\n", file), "rank tail\n");  // no file: unchanged
  { std::ofstream(file) << "ps-lite: scheduler lost a node\n"; }
  EXPECT_EQ(with_roles_output("rank tail", file),
            "rank tail\n--- the extra roles' output ---\nps-lite: scheduler lost a node\n");
  EXPECT_FALSE(std::filesystem::exists(file));
  // Both long: each keeps its end, and the whole fits the record's tail.
  { std::ofstream(file) << std::string(10000, 'r') << "ROLE END"; }
  const std::string joined = with_roles_output(std::string(10000, 'k') + "RANK END\n", file);
  EXPECT_LE(joined.size(), kStderrTailBytes + 1);
  EXPECT_NE(joined.find("RANK END\n--- the extra roles' output ---\n"), std::string::npos);
  EXPECT_EQ(joined.substr(joined.size() - 8), "ROLE END");
}

TEST(runtime_roles, TheSubcommandNeedsARoleOtherThanWorker) {
  // Started by hand (no DLHOST_ROLE) or as a worker: refused before anything loads.
  unsetenv("DLHOST_ROLE");
  EXPECT_EQ(runtime_role_main("{}"), 2);
  setenv("DLHOST_ROLE", "worker", 1);
  setenv("DLHOST_ROLE_INDEX", "0", 1);
  EXPECT_EQ(runtime_role_main("{}"), 2);
  setenv("DLHOST_ROLE", "server", 1);  // MXNet's word; the cluster's is "ps"
  EXPECT_EQ(runtime_role_main("{}"), 2);
  unsetenv("DLHOST_ROLE");
  unsetenv("DLHOST_ROLE_INDEX");
}

}  // namespace
}  // namespace dlhost
