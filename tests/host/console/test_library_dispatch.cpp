// test_library_dispatch.cpp — the `library_dispatch` warning on constructed records: what the
// worker's dispatch query found (environment.library_dispatch) is injected, so the rule is
// checked for CPUs and libraries this machine does not have (OpenBLAS's Prescott fallback on an
// AVX-512 Xeon, MXNet's SSE3 operators).
#include <gtest/gtest.h>

#include "console/library_dispatch.h"
#include "console/warnings.h"

namespace dlhost {
namespace {

using json = nlohmann::ordered_json;

json openblas(const std::string& core, const std::string& isa, json variable = nullptr) {
  return json{{"library", "OpenBLAS"},
              {"version", "OpenBLAS 0.3.21"},
              {"path", "/lib/libopenblas.so.0"},
              {"dispatched", core},
              {"cpu_isa", isa},
              {"coretype_variable", variable}};
}

json record(json dispatch, json params = json::object(), json libraries = json::object(),
            const std::string& isa = "avx512_core") {
  if (!params.contains("backend")) params["backend"] = "cpu_libtorch";
  return json{
      {"status", "OK"},
      {"params", params},
      {"timing", {{"samples", {{"step", {1.0, 1.0, 1.0}}}}}},
      {"environment", {{"isa", isa}, {"libraries", libraries}, {"library_dispatch", dispatch}}}};
}

TEST(LibraryDispatch, PrescottOnAnAvx512CpuNamesTheLibraryTheCoreTheIsaAndTheFix) {
  auto w = library_dispatch_warnings(
      record(json::array({openblas("Prescott", "AVX-512")}), {{"openblas_coretype", "Prescott"}}));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].code, kWarnLibraryDispatch);
  for (const char* part : {"OpenBLAS 0.3.21", "Prescott", "SSE", "AVX-512",
                           "openblas_coretype: auto", "OPENBLAS_CORETYPE=SkylakeX"})
    EXPECT_NE(w[0].message.find(part), std::string::npos) << part << " in: " << w[0].message;
}

TEST(LibraryDispatch, AnInheritedNarrowerCoreIsNamedAsTheCause) {
  auto w =
      library_dispatch_warnings(record(json::array({openblas("Haswell", "AVX-512", "Haswell")})));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].message.find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << w[0].message;
  EXPECT_NE(w[0].message.find("AVX2"), std::string::npos) << w[0].message;
}

TEST(LibraryDispatch, TheCoreOfTheCpusIsaIsQuiet) {
  EXPECT_TRUE(
      library_dispatch_warnings(record(json::array({openblas("SkylakeX", "AVX-512")}))).empty());
  EXPECT_TRUE(
      library_dispatch_warnings(record(json::array({openblas("Zen", "AVX2")}), {}, {}, "avx2"))
          .empty());
  EXPECT_TRUE(
      library_dispatch_warnings(record(json::array({openblas("Prescott", "SSE")}))).empty());
  EXPECT_TRUE(library_dispatch_warnings(record(json::array())).empty());
  // An unknown core says nothing rather than guess.
  EXPECT_TRUE(
      library_dispatch_warnings(record(json::array({openblas("Mystery", "AVX-512")}))).empty());
}

TEST(LibraryDispatch, MxnetsSse3OperatorsAreSaidToBeFixedWhenTheWheelIsBuilt) {
  const json libraries = {{"cpu_mxnet",
                           "MXNet 1.9.1 (oneDNN 2.4.4, OpenBLAS 0.3.13, OpenMP; MXNet's kernels "
                           "SSE3)"}};
  auto w = library_dispatch_warnings(
      record(json::array(), {{"backend", "cpu_mxnet"}}, libraries, "avx512_core_amx"));
  ASSERT_EQ(w.size(), 1u);
  for (const char* part : {"MXNet 1.9.1", "SSE3", "AVX-512", "fixed when the wheel is built"})
    EXPECT_NE(w[0].message.find(part), std::string::npos) << part << " in: " << w[0].message;
  // Another backend's record, or an SSE-only CPU: nothing.
  EXPECT_TRUE(library_dispatch_warnings(
                  record(json::array(), {{"backend", "cpu_onednn"}}, libraries, "avx512_core"))
                  .empty());
  EXPECT_TRUE(library_dispatch_warnings(
                  record(json::array(), {{"backend", "cpu_mxnet"}}, libraries, "sse41"))
                  .empty());
}

// The rule is one of the case's warnings: the record's `warnings` array carries it.
TEST(LibraryDispatch, IsAmongTheCasesWarnings) {
  auto all = case_warnings(record(json::array({openblas("Prescott", "AVX-512")})), CaseLoad{});
  bool found = false;
  for (const Warning& w : all) found = found || w.code == kWarnLibraryDispatch;
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace dlhost
