// test_shipped_suites.cpp — every suite shipped in suites/ loads through the suite loader with
// this build's plugins (the catalog `dlhost run` would use), expands to at least one case, and
// has unique case ids; a suite that breaks when a key or a plugin changes fails here, not on a
// user's cluster. (`dlhost validate` on the same files is a script test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/networks.h"
#include "core/plugin_registry.h"
#include "suite/suite.h"

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

}  // namespace
