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
  EXPECT_FALSE(is_tool_runtime("none"));
  EXPECT_FALSE(is_tool_runtime("gloo"));
  EXPECT_FALSE(is_tool_runtime("tf_ps"));  // not backed yet: not accepted
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

}  // namespace
}  // namespace dlhost
