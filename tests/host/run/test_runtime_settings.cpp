// test_runtime_settings.cpp — the case's runtime environment (run/runtime_settings.h) from its
// keys: the allocator found (or not) in constructed library folders, the frameworks' table
// (MXNet's cap instead of OMP_NUM_THREADS), OpenBLAS's core for `auto` on constructed CPU flags,
// OpenMP's wait policy, and that the step was fused only where the backend said so.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/compatibility.h"
#include "run/runtime_settings.h"

namespace dlhost {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const std::set<std::string> kAvx512 = {"avx",      "avx2",     "fma",     "avx512f",
                                       "avx512bw", "avx512vl", "avx512dq"};

// A folder holding empty files of these names, removed with the test.
struct LibraryFolder {
  fs::path path;
  explicit LibraryFolder(const std::vector<std::string>& files) {
    path = fs::temp_directory_path() /
           ("dlhost-allocators-" + std::to_string(::getpid()) + "-" + std::to_string(files.size()));
    fs::create_directories(path);
    for (const auto& f : files) std::ofstream(path / f) << "";
  }
  ~LibraryFolder() { fs::remove_all(path); }
};

std::string value_of(const CaseEnvironment& env, const std::string& variable) {
  for (const auto& [k, v] : env.set)
    if (k == variable) return v;
  return "<not set>";
}

bool unsets(const CaseEnvironment& env, const std::string& variable) {
  for (const auto& v : env.unset)
    if (v == variable) return true;
  return false;
}

// A sanitizer's runtime replaces malloc, so a sanitizer build (scripts/sanitize.sh) keeps the
// system allocator whatever the case asks, and says why when a case names another
// (runtime_settings.cpp). There this checks that rule and returns true: the allocator tests'
// subject does not exist in such a build, and they skip saying so.
bool sanitizer_keeps_the_system_malloc() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  LibraryFolder both({"libtcmalloc_minimal.so.4", "libjemalloc.so.2"});
  for (const char* asked : {"tcmalloc", "jemalloc"}) {
    AllocatorChoice a =
        choose_allocator(case_params(json{{"allocator", asked}}), {both.path.string()});
    EXPECT_EQ(a.name, "system") << asked;
    EXPECT_NE(a.skip_reason.find("sanitizer"), std::string::npos) << a.skip_reason;
  }
  AllocatorChoice a = choose_allocator(case_params(json::object()), {both.path.string()});
  EXPECT_EQ(a.name, "system");
  EXPECT_TRUE(a.skip_reason.empty()) << "an unset key never skips: " << a.skip_reason;
  return true;
#else
  return false;
#endif
}
constexpr const char* kSanitizerSkip =
    "a sanitizer build keeps the system allocator (checked); the allocator choice is tested in "
    "the normal build";

TEST(RuntimeSettings, UnsetAllocatorTakesTcmallocWhereInstalledElseSystem) {
  if (sanitizer_keeps_the_system_malloc()) GTEST_SKIP() << kSanitizerSkip;
  LibraryFolder with({"libtcmalloc_minimal.so.4"}), without({});
  AllocatorChoice a = choose_allocator(case_params(json::object()), {with.path.string()});
  EXPECT_EQ(a.requested, "auto");
  EXPECT_EQ(a.name, "tcmalloc");
  EXPECT_EQ(a.library, (with.path / "libtcmalloc_minimal.so.4").string());
  a = choose_allocator(case_params(json::object()), {without.path.string()});
  EXPECT_EQ(a.name, "system");
  EXPECT_TRUE(a.skip_reason.empty()) << "an unset key never skips: " << a.skip_reason;
}

TEST(RuntimeSettings, ANamedAllocatorThatIsMissingSkipsTheCaseSayingWhatAndWhere) {
  if (sanitizer_keeps_the_system_malloc()) GTEST_SKIP() << kSanitizerSkip;
  LibraryFolder only_tcmalloc({"libtcmalloc_minimal.so.4"});
  AllocatorChoice a =
      choose_allocator(case_params(json{{"allocator", "jemalloc"}}), {only_tcmalloc.path.string()});
  EXPECT_EQ(a.name, "system");
  for (const char* part : {"jemalloc", "libjemalloc.so.2", "not installed", "libjemalloc2"})
    EXPECT_NE(a.skip_reason.find(part), std::string::npos) << part << " in: " << a.skip_reason;
  EXPECT_NE(a.skip_reason.find(only_tcmalloc.path.string()), std::string::npos) << a.skip_reason;
  a = choose_allocator(case_params(json{{"allocator", "system"}}), {only_tcmalloc.path.string()});
  EXPECT_EQ(a.name, "system");
  EXPECT_TRUE(a.library.empty());
}

TEST(RuntimeSettings, TheAllocatorIsPreloadedAndHandedToBackendNamespaces) {
  if (sanitizer_keeps_the_system_malloc()) GTEST_SKIP() << kSanitizerSkip;
  LibraryFolder folder({"libjemalloc.so.2"});
  CaseEnvironment env =
      case_environment(case_params(json{{"allocator", "jemalloc"}, {"threads", 1}}),
                       {folder.path.string()}, kAvx512);
  const std::string lib = (folder.path / "libjemalloc.so.2").string();
  EXPECT_NE(value_of(env, "LD_PRELOAD").find(lib), std::string::npos);
  EXPECT_EQ(value_of(env, "DLHOST_NAMESPACE_ALLOCATOR"), lib);
  // PyTorch's launcher's settings for jemalloc.
  EXPECT_EQ(value_of(env, "MALLOC_CONF"),
            "oversize_threshold:1,background_thread:true,metadata_thp:auto");
  EXPECT_NE(value_of(env, "GLIBC_TUNABLES").find("glibc.rtld.optional_static_tls="),
            std::string::npos);
  // The system allocator: no preload of ours, and no namespace allocator left over.
  env =
      case_environment(case_params(json{{"allocator", "system"}}), {folder.path.string()}, kAvx512);
  EXPECT_EQ(value_of(env, "LD_PRELOAD"), "<not set>");
  EXPECT_TRUE(unsets(env, "DLHOST_NAMESPACE_ALLOCATOR"));
}

TEST(RuntimeSettings, FrameworksGetTheirGuidesThreadSettings) {
  CaseEnvironment env = case_environment(
      case_params(json{{"backend", "cpu_libtorch2"}, {"threads", 2}}), {}, kAvx512);
  EXPECT_EQ(value_of(env, "OMP_NUM_THREADS"), "2");
  EXPECT_EQ(value_of(env, "MKL_NUM_THREADS"), "2");
  EXPECT_EQ(value_of(env, "OPENBLAS_NUM_THREADS"), "2");
  EXPECT_EQ(value_of(env, "MXNET_OMP_MAX_THREADS"), "<not set>");
  // MXNet: its cap, and OMP_NUM_THREADS removed (MXNet would ignore the cap for oneDNN).
  env = case_environment(case_params(json{{"backend", "cpu_mxnet"}, {"threads", 2}}), {}, kAvx512);
  EXPECT_TRUE(unsets(env, "OMP_NUM_THREADS"));
  EXPECT_EQ(value_of(env, "MXNET_OMP_MAX_THREADS"), "2");
  EXPECT_EQ(value_of(env, "MXNET_ENGINE_TYPE"), "ThreadedEnginePerDevice");
  // threads 0, the backend's default: the thread variables stay as inherited.
  env = case_environment(case_params(json{{"backend", "cpu_onednn"}, {"threads", 0}}), {}, kAvx512);
  EXPECT_EQ(value_of(env, "OMP_NUM_THREADS"), "<not set>");
  EXPECT_FALSE(unsets(env, "OMP_NUM_THREADS"));
}

TEST(RuntimeSettings, OpenblasCoretypeAutoTakesTheCoreOfTheCpusWidestIsa) {
  EXPECT_EQ(openblas_coretype_setting("auto", kAvx512), "SkylakeX");
  EXPECT_EQ(openblas_coretype_setting("auto", {"avx", "avx2", "fma"}), "Haswell");
  EXPECT_EQ(openblas_coretype_setting("auto", {"avx"}), "Sandybridge");
  EXPECT_EQ(openblas_coretype_setting("auto", {"sse3"}), "");
  EXPECT_EQ(openblas_coretype_setting("Prescott", kAvx512), "Prescott");
  CaseEnvironment env = case_environment(case_params(json::object()), {}, kAvx512);
  EXPECT_EQ(value_of(env, "OPENBLAS_CORETYPE"), "SkylakeX");
  EXPECT_LT(openblas_core_rank("Prescott"), openblas_core_rank("SkylakeX"));
  EXPECT_EQ(openblas_core_rank("haswell"), 3);  // OpenBLAS reads the name in any case
}

TEST(RuntimeSettings, OmpWaitPolicyIsSetOnlyWhenTheCaseSaysSo) {
  EXPECT_EQ(
      value_of(case_environment(case_params(json{{"omp_wait_policy", "passive"}}), {}, kAvx512),
               "OMP_WAIT_POLICY"),
      "PASSIVE");
  EXPECT_EQ(
      value_of(case_environment(case_params(json{{"omp_wait_policy", "active"}}), {}, kAvx512),
               "OMP_WAIT_POLICY"),
      "ACTIVE");
  EXPECT_EQ(value_of(case_environment(case_params(json::object()), {}, kAvx512), "OMP_WAIT_POLICY"),
            "<not set>");
}

TEST(RuntimeSettings, CaseEnvJsonSaysWhatToSetAndRemove) {
  json j = case_environment_json(
      case_environment(case_params(json{{"backend", "cpu_mxnet"}, {"threads", 1}}), {}, kAvx512));
  EXPECT_EQ(j["set"]["MXNET_OMP_MAX_THREADS"], "1");
  EXPECT_NE(std::find(j["unset"].begin(), j["unset"].end(), "OMP_NUM_THREADS"), j["unset"].end());
  EXPECT_EQ(j["allocator"]["name"], "system");  // no folder given: nothing installed
}

// timing.fused_step: what the backend said (ABI 1.5), not what the host allowed.
TEST(FusedStep, IsWhatA1_5BackendSaysAndWhatWasAllowedForAnOlderOne) {
  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  info.fused_step = 0;
  EXPECT_FALSE(step_was_fused(5, true, info));  // allowed, but three real phases
  info.fused_step = 1;
  EXPECT_TRUE(step_was_fused(5, true, info));
  EXPECT_FALSE(step_was_fused(5, false, info));  // not allowed: never fused
  info.fused_step = 0;
  EXPECT_TRUE(step_was_fused(4, true, info));  // a 1.4 plugin cannot say: taken as fused
  EXPECT_FALSE(step_was_fused(4, false, info));
}

// resolved.departures: the lines a 1.5 backend declares, blanks dropped; nothing from an older one.
TEST(Departures, AreTheLinesA1_5BackendDeclares) {
  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  EXPECT_TRUE(departures_of(5, info).empty());  // NULL: none known
  info.departures = "batch norm: fused\n\n  global pool: mean \n";
  EXPECT_EQ(departures_of(5, info),
            (std::vector<std::string>{"batch norm: fused", "global pool: mean"}));
  EXPECT_TRUE(departures_of(4, info).empty());  // a 1.4 plugin cannot say
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE_1_0;
  EXPECT_TRUE(departures_of(5, info).empty());  // a struct that does not cover the field
}

}  // namespace
}  // namespace dlhost
