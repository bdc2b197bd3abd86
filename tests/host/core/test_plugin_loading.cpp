// test_plugin_loading.cpp — discovery refuses each kind of bad file with its path and a reason a
// user can act on, while the good plugins in the same search still load; a plugin others could
// have written is refused before it is opened (core/plugin_trust.h).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/networks.h"
#include "core/plugin_registry.h"
#include "core/plugin_trust.h"

namespace {

const std::string kGood = DLHOST_TEST_PLUGIN_DIR;
const std::string kBad = DLHOST_TEST_BINARY_DIR "/tests/fixture_plugins";

std::string reason_for(const dlhost::PluginRegistry& r, const std::string& file) {
  for (const auto& x : r.refused())
    if (x.path == kBad + "/" + file) return x.reason;
  return "<not refused>";
}

class PluginLoading : public ::testing::Test {
 protected:
  void SetUp() override { registry.discover({kGood, kBad}); }
  dlhost::PluginRegistry registry;
};

TEST_F(PluginLoading, GoodPluginsLoadDespiteBadNeighbours) {
  ASSERT_NE(registry.find(DLHOST_PLUGIN_NETWORK, "networks_paper"), nullptr);
  ASSERT_NE(registry.find(DLHOST_PLUGIN_BACKEND, "cpu_onednn"), nullptr);
  auto nets = dlhost::list_networks(registry);
  EXPECT_NE(dlhost::find_network(nets, "lenet"), nullptr);
}

// A suite that leaves `backend` unset runs on this one: cpu_reference (priority -100) and the
// unusable fixture lose to cpu_onednn (priority 0).
TEST_F(PluginLoading, HighestPriorityUsableBackendIsPreferred) {
  ASSERT_NE(registry.find(DLHOST_PLUGIN_BACKEND, "cpu_reference"), nullptr);
  EXPECT_EQ(registry.find(DLHOST_PLUGIN_BACKEND, "cpu_reference")->priority, -100);
  const dlhost::LoadedPlugin* best = registry.highest_priority(DLHOST_PLUGIN_BACKEND);
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(best->name, "cpu_onednn");
}

TEST_F(PluginLoading, WrongMajorIsRefusedNamingBothVersions) {
  std::string why = reason_for(registry, "libfixture_wrong_major.so");
  EXPECT_NE(why.find("built against dlhost ABI 2.0"), std::string::npos) << why;
  EXPECT_NE(why.find("this host speaks ABI 1."), std::string::npos) << why;
  EXPECT_EQ(registry.find(DLHOST_PLUGIN_NETWORK, "from_the_future"), nullptr);
}

TEST_F(PluginLoading, LibraryWithoutEntrySymbolIsRefused) {
  std::string why = reason_for(registry, "libfixture_no_entry.so");
  EXPECT_NE(why.find("no entry symbol 'dlhost_plugin_entry'"), std::string::npos) << why;
}

TEST_F(PluginLoading, FileThatIsNotALibraryIsRefusedWithDlerrorText) {
  std::string why = reason_for(registry, "not_a_library.so");
  EXPECT_NE(why.find("cannot load"), std::string::npos) << why;
  // dlerror() says why: for a text file, "invalid ELF header" or "file too short".
  EXPECT_TRUE(why.find("invalid ELF header") != std::string::npos ||
              why.find("file too short") != std::string::npos)
      << why;
}

TEST_F(PluginLoading, EntryReturningNullIsRefused) {
  std::string why = reason_for(registry, "libfixture_null_entry.so");
  EXPECT_NE(why.find("entry returned NULL"), std::string::npos) << why;
}

TEST_F(PluginLoading, TableSmallerThanV1IsRefused) {
  std::string why = reason_for(registry, "libfixture_short_table.so");
  EXPECT_NE(why.find("backend table is missing or smaller than ABI 1.0's"), std::string::npos)
      << why;
}

TEST_F(PluginLoading, UnusablePluginLoadsWithItsReason) {
  const auto* p = registry.find(DLHOST_PLUGIN_NETWORK, "unusable");
  ASSERT_NE(p, nullptr);
  EXPECT_FALSE(p->usable);
  EXPECT_EQ(p->unusable_reason, "needs hardware this machine lacks");
}

TEST_F(PluginLoading, DuplicateIsRefusedNamingTheFirst) {
  ASSERT_FALSE(registry.load_file(kGood + "/libdlhost_networks_paper.so"));
  EXPECT_NE(registry.refused().back().reason.find("duplicate network plugin 'networks_paper'"),
            std::string::npos);
}

TEST(PluginLoadingSingle, MissingFileIsRefused) {
  dlhost::PluginRegistry registry;
  EXPECT_FALSE(registry.load_file("/nonexistent/libdlhost_nothing.so"));
  ASSERT_EQ(registry.refused().size(), 1u);
  EXPECT_NE(registry.refused()[0].reason.find("cannot load"), std::string::npos);
}

// The build's notes on plugins it left out (`NAME.left-out`): read as one inert line each, and
// dropped for a name that is loaded all the same (a note left by an older configure).
TEST(PluginLoadingSingle, LeftOutNotesGiveTheBuildsReason) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "dlhost_left_out_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "cpu_notbuilt.left-out") << "no wheel\x1b[2J here\nsecond line\n";
  std::ofstream(dir / "networks_paper.left-out") << "stale note\n";
  std::ofstream(dir / "Bad Name.left-out") << "ignored\n";
  dlhost::PluginRegistry registry;
  registry.discover({kGood, dir.string()});
  EXPECT_EQ(registry.left_out_reason("cpu_notbuilt"), "no wheel[2J here");
  EXPECT_EQ(registry.left_out_reason("networks_paper"), "");  // it loaded
  // The build's own folder may hold real notes (a backend whose wheel was absent): count ours.
  int ours = 0, stale = 0;
  for (const auto& l : registry.left_out()) {
    ours += l.name == "cpu_notbuilt";
    stale += l.name == "networks_paper" || l.name == "Bad Name";
  }
  EXPECT_EQ(ours, 1);
  EXPECT_EQ(stale, 0);
  fs::remove_all(dir);
}

// A note is read no further than what is shown (400 bytes of its first line): a huge or sparse
// `.left-out` file costs what a short one does (it was read whole, line and all).
TEST(PluginLoadingSingle, AHugeLeftOutNoteIsNotReadWhole) {
  namespace fs = std::filesystem;
  std::string made = (fs::temp_directory_path() / "dlhost_left_out_huge-XXXXXX").string();
  ASSERT_NE(::mkdtemp(made.data()), nullptr);
  const fs::path dir = made;
  std::ofstream(dir / "cpu_long.left-out") << std::string(10000, 'y') << "\n";
  std::ofstream(dir / "cpu_sparse.left-out").close();
  fs::resize_file(dir / "cpu_sparse.left-out", 512ull << 20);  // sparse: zeros, no newline
  struct rusage before {
  }, after{};
  ::getrusage(RUSAGE_SELF, &before);
  dlhost::PluginRegistry registry;
  registry.discover({dir.string()});
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_EQ(registry.left_out_reason("cpu_long"), std::string(400, 'y'));
  EXPECT_EQ(registry.left_out_reason("cpu_sparse"), "left out by the build (no reason given)");
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "kB of peak memory to read notes";
  fs::remove_all(dir);
}

// A plugin file, or its folder, that others can write is refused before dlopen runs its code
// (the fixture marks a file from its library constructor), with the reason in the refused list;
// the same file in a folder of the user's own loads.
class PluginTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    ::unsetenv(dlhost::kAllowUnsafePluginPathsEnv);
    dir_ = (fs::temp_directory_path() / "dlhost_plugin_trust-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);  // one per test: ctest runs them side by side
    ::chmod(dir_.c_str(), 0755);
    plugin_ = dir_ + "/libfixture_load_mark.so";
    fs::copy_file(DLHOST_TEST_BINARY_DIR "/tests/fixture_load_mark/libfixture_load_mark.so",
                  plugin_);
    ::chmod(plugin_.c_str(), 0755);
    mark_ = dir_ + ".mark";
    fs::remove(mark_);
    ::setenv("DLHOST_TEST_LOAD_MARK", mark_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("DLHOST_TEST_LOAD_MARK");
    ::unsetenv(dlhost::kAllowUnsafePluginPathsEnv);
    std::filesystem::remove_all(dir_);
    std::filesystem::remove(mark_);
  }
  // The reason the plugin was refused ("" when it was not), after a fresh discovery.
  std::string discover_refusal() {
    dlhost::PluginRegistry registry;
    registry.discover({dir_});
    for (const auto& r : registry.refused())
      if (r.path == plugin_ && r.reason.find("not loaded:") != std::string::npos) return r.reason;
    return "";
  }
  bool loaded() const { return std::filesystem::exists(mark_); }
  std::string dir_, plugin_, mark_;
};

TEST_F(PluginTrust, AWorldWritableFolderIsRefusedBeforeThePluginRuns) {
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  const std::string why = discover_refusal();
  EXPECT_NE(why.find("its folder " + dir_ + " is world-writable (mode 0777)"), std::string::npos)
      << why;
  EXPECT_NE(why.find(dlhost::kAllowUnsafePluginPathsEnv), std::string::npos) << why;
  EXPECT_FALSE(loaded()) << "the plugin's constructor ran";
  dlhost::PluginRegistry direct;
  EXPECT_FALSE(direct.load_file(plugin_));
  EXPECT_FALSE(loaded()) << "load_file ran the plugin's constructor";
  // The same file in a folder of the user's own is loaded (its entry then declines).
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  EXPECT_EQ(discover_refusal(), "");
  EXPECT_TRUE(loaded()) << "the fixture did not mark its load: this test could not fail";
}

TEST_F(PluginTrust, AGroupWritableFileIsRefused) {
  ASSERT_EQ(::chmod(plugin_.c_str(), 0775), 0);
  const std::string why = discover_refusal();
  EXPECT_NE(why.find("the file is group-writable (mode 0775"), std::string::npos) << why;
  EXPECT_FALSE(loaded());
}

TEST_F(PluginTrust, AFileOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving the file to another user needs root (chown)";
  ASSERT_EQ(::chown(plugin_.c_str(), 65534, 65534), 0);
  const std::string why = discover_refusal();
  EXPECT_NE(why.find("the file is owned by uid 65534"), std::string::npos) << why;
  EXPECT_FALSE(loaded());
}

TEST_F(PluginTrust, TheOverrideLoadsItAnyway) {
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  ::setenv(dlhost::kAllowUnsafePluginPathsEnv, "1", 1);
  EXPECT_EQ(discover_refusal(), "");
  EXPECT_TRUE(loaded());
}

// The same folder twice, as `--plugin-path build/plugins` on an in-tree dlhost gives it (and
// another spelling of it): read once, so no plugin is refused as a duplicate of itself.
TEST(PluginLoadingSingle, AFolderNamedTwiceIsReadOnce) {
  dlhost::PluginRegistry registry;
  registry.discover(
      {kGood, kGood + "/.", kGood + "/../" + std::filesystem::path(kGood).filename().string()});
  ASSERT_NE(registry.find(DLHOST_PLUGIN_BACKEND, "cpu_reference"), nullptr);
  for (const auto& r : registry.refused())
    EXPECT_EQ(r.reason.find("duplicate"), std::string::npos) << r.path << ": " << r.reason;
}

}  // namespace
