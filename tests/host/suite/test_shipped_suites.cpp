// test_shipped_suites.cpp — every suite shipped in suites/ loads through the suite loader with
// this build's plugins (the catalog `dlhost run` would use), expands to at least one case, and
// has unique case ids; a suite that breaks when a key or a plugin changes fails here, not on a
// user's cluster. (`dlhost validate` on the same files is a script test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/networks.h"
#include "core/plugin_registry.h"
#include "suite/suite.h"
#include "suite/tool_runtimes.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> shipped_suites() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(DLHOST_TEST_SOURCE_DIR) / "suites"))
    if (e.path().extension() == ".yaml") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The catalog of this build's plugins, as `dlhost run` makes it.
const dlhost::SuiteCatalog& build_catalog() {
  static const dlhost::SuiteCatalog catalog = [] {
    static dlhost::PluginRegistry registry;
    registry.discover({DLHOST_TEST_PLUGIN_DIR});
    dlhost::SuiteCatalog c;
    for (const auto& n : dlhost::list_networks(registry)) c.networks.push_back(n.name);
    c.backends = registry.names(DLHOST_PLUGIN_BACKEND);
    c.comms = registry.names(DLHOST_PLUGIN_COMM);
    for (const auto& p : registry.plugins()) c.plugins.push_back(p.name);
    for (const auto& l : registry.left_out()) c.left_out[l.name] = l.reason;
    if (const auto* best = registry.highest_priority(DLHOST_PLUGIN_BACKEND))
      c.preferred_backend = best->name;
    return c;
  }();
  return catalog;
}

class ShippedSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedSuite, LoadsWithThisBuildsPlugins) {
  const std::string path = std::string(DLHOST_TEST_SOURCE_DIR) + "/suites/" + GetParam();
  dlhost::Suite suite;
  ASSERT_NO_THROW(suite = dlhost::load_suite(path, build_catalog(), 4)) << path;
  EXPECT_FALSE(suite.name.empty());
  ASSERT_FALSE(suite.cases.empty());
  std::set<std::string> ids;
  for (const auto& c : suite.cases) {
    EXPECT_TRUE(ids.insert(c.id).second) << "duplicate id " << c.id;
    EXPECT_TRUE(c.params.contains("network") && c.params.contains("backend")) << c.id;
  }
}

TEST(ShippedSuites, AreFound) { EXPECT_GE(shipped_suites().size(), 3u); }

INSTANTIATE_TEST_SUITE_P(Suites, ShippedSuite, ::testing::ValuesIn(shipped_suites()),
                         [](const auto& param_info) {
                           std::string name =
                               param_info.param.substr(0, param_info.param.rfind('.'));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// suites/distributed_tools.yaml (issue 41): Du et al.'s networks x each tool with the comm that
// moves its gradients (dlhost's mpi and gloo on cpu_onednn, each framework's own runtime on its
// backend) x 1 rank and 2/4 ranks over 10gbe and 1gbe test hosts. A comm this build does not
// accept yet (tf_collective, tf_ps, mxnet_kvstore until their runtimes land) loads and makes its
// cases SKIPPED naming it, not a load error.
TEST(ShippedSuites, DistributedToolsPairsEachToolWithItsRuntime) {
  const std::string path = std::string(DLHOST_TEST_SOURCE_DIR) + "/suites/distributed_tools.yaml";
  dlhost::Suite suite;
  ASSERT_NO_THROW(suite = dlhost::load_suite(path, build_catalog(), 2));
  const std::map<std::string, std::string> owner = {
      {"mpi", "cpu_onednn"},          {"gloo", "cpu_onednn"},
      {"torch_ddp", "cpu_libtorch2"}, {"tf_collective", "cpu_tensorflow"},
      {"tf_ps", "cpu_tensorflow"},    {"mxnet_kvstore", "cpu_mxnet"},
      {"bigdl_spark", "cpu_bigdl"}};
  // 6 networks x 8 tools (tf_ps async and sync) x (1 rank + 2 and 4 ranks over two links).
  EXPECT_EQ(suite.cases.size(), 6u * 8u * 5u);
  std::map<std::string, int> ps_modes;
  std::map<std::string, int> per_comm;
  for (const auto& c : suite.cases) {
    const std::string comm = c.params.at("comm").get<std::string>();
    ASSERT_TRUE(owner.count(comm)) << c.id << " has comm " << comm;
    EXPECT_EQ(c.params.at("backend").get<std::string>(), owner.at(comm)) << c.id;
    const int64_t ranks = c.params.at("ranks").get<int64_t>();
    const std::string link = c.params.at("interconnect").get<std::string>();
    EXPECT_TRUE(ranks == 1 ? link == "loopback" : (link == "10gbe" || link == "1gbe"))
        << c.id << ": " << ranks << " ranks over " << link;
    EXPECT_EQ(c.params.at("launcher").get<std::string>(), "mpirun") << c.id;
    ++per_comm[comm];
    const auto options = c.params.find("options");
    const bool sync = options != c.params.end() && options->contains("cpu_tensorflow") &&
                      options->at("cpu_tensorflow").value("ps_mode", "") == "sync";
    EXPECT_TRUE(!sync || comm == "tf_ps") << c.id << ": ps_mode sync with " << comm;
    if (comm == "tf_ps") ++ps_modes[sync ? "sync" : "async"];
    const auto& comms = build_catalog().comms;
    const bool accepted =
        dlhost::is_tool_runtime(comm) || std::find(comms.begin(), comms.end(), comm) != comms.end();
    if (!accepted) {
      EXPECT_NE(c.skip_reason.find("comm '" + comm + "' is not installed here"), std::string::npos)
          << c.id << ": " << c.skip_reason;
    }
  }
  for (const auto& [comm, backend] : owner)
    EXPECT_EQ(per_comm[comm], comm == "tf_ps" ? 60 : 30) << comm;
  EXPECT_EQ(ps_modes["async"], 30);
  EXPECT_EQ(ps_modes["sync"], 30);
}

}  // namespace
