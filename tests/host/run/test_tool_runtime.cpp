// test_tool_runtime.cpp — which backend a tool's own runtime (`comm: torch_ddp`, issue 41) runs
// on: the host asks the backend's DLHOST_EXT_TOOL_RUNTIME (ABI 1.5) and SKIPs the case with the
// reason otherwise: no extension (or a plugin before 1.5), a runtime the backend does not own,
// or the backend's own refusal (a build without the runtime).
#include <gtest/gtest.h>

#include <string>

#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "dlhost/dlhost_device.h"
#include "run/tool_runtime.h"

namespace dlhost {
namespace {

dlhost_status* accepts(const char*) { return nullptr; }
dlhost_status* refuses(const char*) {
  return host_api()->status_create(DLHOST_CODE_UNIMPLEMENTED, "built without c10d");
}

dlhost_tool_runtime_ext runtime_ext(dlhost_status* (*query)(const char*)) {
  dlhost_tool_runtime_ext e{};
  e.struct_size = DLHOST_TOOL_RUNTIME_EXT_STRUCT_SIZE;
  e.type = DLHOST_EXT_TOOL_RUNTIME;
  e.runtimes = "torch_ddp";
  e.runtime_query = query;
  return e;
}

struct FakeBackend {
  explicit FakeBackend(const dlhost_tool_runtime_ext* ext, uint32_t minor = 5) {
    table.struct_size = DLHOST_PLUGIN_STRUCT_SIZE;
    table.extensions = reinterpret_cast<const dlhost_extension*>(ext);
    plugin.table = &table;
    plugin.name = "fake";
    plugin.speaks_minor = minor;
  }
  dlhost_plugin table{};
  LoadedPlugin plugin;
};

TEST(ToolRuntime, NamesAreTheBackedRuntimesOnly) {
  EXPECT_TRUE(is_tool_runtime("torch_ddp"));
  EXPECT_TRUE(is_tool_runtime("mxnet_kvstore"));
  EXPECT_TRUE(is_tool_runtime("tf_collective"));
  EXPECT_TRUE(is_tool_runtime("tf_ps"));
  EXPECT_FALSE(is_tool_runtime("none"));
  EXPECT_FALSE(is_tool_runtime("gloo"));
  EXPECT_FALSE(is_tool_runtime("tf_ps_sync"));  // not backed: not accepted
}

TEST(ToolRuntime, ABackendThatOwnsItAndAcceptsRunsIt) {
  const dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  FakeBackend b(&ext);
  EXPECT_EQ(tool_runtime_refusal(b.plugin, "torch_ddp"), std::nullopt);
}

TEST(ToolRuntime, ABackendWithoutTheExtensionIsRefusedWithTheReason) {
  FakeBackend b(nullptr);
  const auto why = tool_runtime_refusal(b.plugin, "torch_ddp");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("backend 'fake' does not own it (it has no tool runtime)"), std::string::npos)
      << *why;
}

TEST(ToolRuntime, APluginBeforeMinor5IsNotAskedAtAll) {
  const dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  FakeBackend b(&ext, 4);
  EXPECT_TRUE(tool_runtime_refusal(b.plugin, "torch_ddp").has_value());
}

TEST(ToolRuntime, ARuntimeTheBackendDoesNotOwnIsRefused) {
  dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  ext.runtimes = "torch_ddp_x,other";  // a name that merely starts alike is not owned
  FakeBackend b(&ext);
  const auto why = tool_runtime_refusal(b.plugin, "torch_ddp");
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("(it owns: torch_ddp_x,other)"), std::string::npos) << *why;
}

TEST(ToolRuntime, TheBackendsOwnRefusalIsTheReason) {
  const dlhost_tool_runtime_ext ext = runtime_ext(refuses);
  FakeBackend b(&ext);
  const auto why = tool_runtime_refusal(b.plugin, "torch_ddp");
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "comm 'torch_ddp' cannot run on backend 'fake': built without c10d");
}

TEST(ToolRuntime, AShortExtensionIsTakenAsAbsent) {
  dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  ext.struct_size = DLHOST_STRUCT_SIZE(dlhost_tool_runtime_ext, runtime_query);
  FakeBackend b(&ext);
  EXPECT_TRUE(tool_runtime_refusal(b.plugin, "torch_ddp").has_value());
}

// --- Extra roles (runtime_roles, runtime_serve) ------------------------------------------------

dlhost_status* two_servers_and_a_scheduler(const char* runtime, int32_t workers,
                                           const dlhost_options*, int32_t* counts) {
  if (std::string(runtime) != "torch_ddp" || workers != 3)
    return host_api()->status_create(DLHOST_CODE_INVALID_ARGUMENT, "unexpected arguments");
  counts[DLHOST_RUNTIME_WORKER] = 99;  // not read: the workers are the ranks
  counts[DLHOST_RUNTIME_PARAMETER_SERVER] = 2;
  counts[DLHOST_RUNTIME_SCHEDULER] = 1;
  return nullptr;
}
dlhost_status* refuses_options(const char*, int32_t, const dlhost_options*, int32_t*) {
  return host_api()->status_create(DLHOST_CODE_INVALID_ARGUMENT, "servers=0 is not a count");
}
dlhost_status* too_many(const char*, int32_t, const dlhost_options*, int32_t* counts) {
  counts[DLHOST_RUNTIME_PARAMETER_SERVER] = 1000;
  return nullptr;
}

// What the last runtime_serve was given (copied: the args live for the call only).
struct Served {
  int32_t role = 0, rank = -1, world_size = 0;
  std::string runtime, cluster, host, store_prefix, option;
  float learning_rate = 0;
  bool has_cluster = false;
} g_served;

dlhost_status* serve(const dlhost_tool_runtime_args* a) {
  g_served.role = a->role;
  g_served.rank = a->rank;
  g_served.world_size = a->world_size;
  g_served.runtime = a->runtime;
  g_served.has_cluster = a->cluster != nullptr;
  g_served.cluster = a->cluster ? a->cluster : "";
  g_served.host = a->host;
  g_served.store_prefix = a->store_prefix;
  auto it = a->options->values.find("servers");
  g_served.option = it != a->options->values.end() ? it->second : "";
  g_served.learning_rate = a->optimizer ? a->optimizer->learning_rate : -1;
  return a->struct_size >= DLHOST_TOOL_RUNTIME_ARGS_STRUCT_SIZE
             ? nullptr
             : host_api()->status_create(DLHOST_CODE_INTERNAL, "short args");
}
dlhost_status* serve_fails(const dlhost_tool_runtime_args*) {
  return host_api()->status_create(DLHOST_CODE_INTERNAL, "the scheduler lost its workers");
}

TEST(ToolRuntimeRoles, TheBackendsCountsPerRoleInTheOrderOfTheirValues) {
  dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  ext.runtime_roles = two_servers_and_a_scheduler;
  ext.runtime_serve = serve;
  FakeBackend b(&ext);
  const auto roles = tool_runtime_roles(b.plugin, "torch_ddp", 3, dlhost_options{});
  ASSERT_EQ(roles.size(), 2u);
  EXPECT_EQ(roles[0].role, DLHOST_RUNTIME_PARAMETER_SERVER);
  EXPECT_EQ(roles[0].count, 2);
  EXPECT_EQ(roles[1].role, DLHOST_RUNTIME_SCHEDULER);
  EXPECT_EQ(roles[1].count, 1);
}

TEST(ToolRuntimeRoles, NoRuntimeRolesMeansWorkersOnly) {
  const dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  FakeBackend b(&ext);
  EXPECT_TRUE(tool_runtime_roles(b.plugin, "torch_ddp", 2, dlhost_options{}).empty());
  FakeBackend none(nullptr);
  EXPECT_TRUE(tool_runtime_roles(none.plugin, "torch_ddp", 2, dlhost_options{}).empty());
}

TEST(ToolRuntimeRoles, RefusalsAndNonsenseAreErrorsNamingTheRuntime) {
  dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  ext.runtime_serve = serve;
  ext.runtime_roles = refuses_options;
  FakeBackend b(&ext);
  try {
    tool_runtime_roles(b.plugin, "torch_ddp", 2, dlhost_options{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("servers=0 is not a count"), std::string::npos)
        << e.what();
  }
  ext.runtime_roles = too_many;
  EXPECT_THROW(tool_runtime_roles(b.plugin, "torch_ddp", 2, dlhost_options{}), Error);
  // Roles, and nothing to run them with.
  ext.runtime_roles = two_servers_and_a_scheduler;
  ext.runtime_serve = nullptr;
  EXPECT_THROW(tool_runtime_roles(b.plugin, "torch_ddp", 3, dlhost_options{}), Error);
}

TEST(ToolRuntimeRoles, ServeGetsItsRoleIndexClusterAddressOptionsAndOptimizer) {
  dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  ext.runtime_roles = two_servers_and_a_scheduler;
  ext.runtime_serve = serve;
  FakeBackend b(&ext);
  dlhost_options options;
  options.values["servers"] = "2";
  dlhost_optimizer_desc sgd{};
  sgd.learning_rate = 0.25f;
  const std::string cluster =
      "worker=10.0.0.1:1001,10.0.0.2:1002;ps=10.0.0.3:1003,10.0.0.4:1004;scheduler=10.0.0.5:1005";
  g_served = {};
  serve_tool_runtime_role(b.plugin, "torch_ddp", DLHOST_RUNTIME_PARAMETER_SERVER, 1, 2,
                          RuntimeJob{cluster, &sgd}, options, 30);
  EXPECT_EQ(g_served.role, DLHOST_RUNTIME_PARAMETER_SERVER);
  EXPECT_EQ(g_served.rank, 1);
  EXPECT_EQ(g_served.world_size, 2);
  EXPECT_EQ(g_served.runtime, "torch_ddp");
  EXPECT_EQ(g_served.cluster, cluster);
  EXPECT_EQ(g_served.host, "10.0.0.4");  // its own place in the cluster
  EXPECT_EQ(g_served.store_prefix, "dlhost/tool_runtime/torch_ddp/");
  EXPECT_EQ(g_served.option, "2");
  EXPECT_FLOAT_EQ(g_served.learning_rate, 0.25f);
  // A role the cluster does not list is the host's mistake, said before the backend is called.
  EXPECT_THROW(serve_tool_runtime_role(b.plugin, "torch_ddp", DLHOST_RUNTIME_SCHEDULER, 1, 2,
                                       RuntimeJob{cluster, &sgd}, options, 30),
               Error);
}

TEST(ToolRuntimeRoles, AServeThatFailsIsAnErrorWithItsReason) {
  dlhost_tool_runtime_ext ext = runtime_ext(accepts);
  ext.runtime_roles = two_servers_and_a_scheduler;
  ext.runtime_serve = serve_fails;
  FakeBackend b(&ext);
  try {
    serve_tool_runtime_role(b.plugin, "torch_ddp", DLHOST_RUNTIME_SCHEDULER, 0, 1,
                            RuntimeJob{"worker=127.0.0.1:1;scheduler=127.0.0.1:2", nullptr},
                            dlhost_options{}, 30);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the scheduler lost its workers"), std::string::npos)
        << e.what();
  }
  // A backend without runtime_serve cannot run a role.
  ext.runtime_serve = nullptr;
  EXPECT_THROW(serve_tool_runtime_role(b.plugin, "torch_ddp", DLHOST_RUNTIME_SCHEDULER, 0, 1,
                                       RuntimeJob{}, dlhost_options{}, 30),
               Error);
}

}  // namespace
}  // namespace dlhost
