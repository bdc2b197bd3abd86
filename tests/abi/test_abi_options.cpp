// test_abi_options.cpp — ABI 1.2 option schemas and capabilities as the kits publish them and the
// host uses them: `dlhost plugins -v` lists declared options, a suite's unknown or mistyped
// option is an error at its FILE:LINE naming the plugin and the option (a plugin without a schema
// keeps 1.1's unchecked options), and a case whose precision the backend lacks is SKIPPED.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "core/compatibility.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "run/runner.h"
#include "suite/suite.h"

namespace {

using json = nlohmann::ordered_json;

const std::string kFixtures = DLHOST_TEST_BINARY_DIR "/tests/abi/fixtures";
const std::string kCompat11 = DLHOST_TEST_BINARY_DIR "/tests/abi_compat/libfixture_compat_v1_1.so";

const dlhost::PluginRegistry& registry() {
  static const dlhost::PluginRegistry* r = [] {
    auto* made = new dlhost::PluginRegistry();  // plugins are never unloaded
    made->discover({DLHOST_TEST_PLUGIN_DIR});
    made->load_file(kFixtures + "/libfixture_schema_backend.so");
    made->load_file(kCompat11);
    return made;
  }();
  return *r;
}

const dlhost::LoadedPlugin& backend(const std::string& name) {
  const auto* p = registry().find(DLHOST_PLUGIN_BACKEND, name);
  if (p == nullptr) throw std::runtime_error(name + " did not load");
  return *p;
}

TEST(OptionSchema, TheKitPublishesWhatABackendDeclares) {
  const auto& demo = backend("schema_demo");
  ASSERT_NE(demo.extensions.option_schema, nullptr);
  ASSERT_EQ(demo.options.size(), 5u);
  EXPECT_EQ(demo.options[0].name, "tile");
  EXPECT_EQ(demo.options[0].type, DLHOST_OPTION_INT);
  EXPECT_EQ(demo.options[0].default_value, std::optional<std::string>("8"));
  EXPECT_EQ(demo.options[1].choices, (std::vector<std::string>{"exact", "fast"}));
  EXPECT_FALSE(demo.options[2].default_value.has_value());
  // The shipped plugins declare that they read no option of their own.
  for (const char* name : {"cpu_reference", "cpu_onednn"}) {
    EXPECT_NE(backend(name).extensions.option_schema, nullptr) << name;
    EXPECT_TRUE(backend(name).options.empty()) << name;
  }
  const auto* mpi = registry().find(DLHOST_PLUGIN_COMM, "mpi");
  if (mpi != nullptr) {
    EXPECT_NE(mpi->extensions.option_schema, nullptr);
  }
}

// A suite checked against this machine's plugins, as `dlhost validate` does.
std::string suite_error(const std::string& options) {
  dlhost::SuiteCatalog catalog;
  catalog.networks = {"lenet"};
  catalog.backends = {"schema_demo", "cpu_reference", "compat_v1_1"};
  catalog.check_option = [](const std::string& p, const std::string& o, const std::string& v) {
    return dlhost::check_plugin_option(registry(), p, o, v);
  };
  const std::string text =
      "name: t\ndefaults: {network: lenet}\ncases:\n  - backend: schema_demo\n"
      "    options:\n" +
      options;
  try {
    dlhost::load_suite_text(text, "opts.yaml", catalog, 0);
  } catch (const dlhost::SuiteError& e) {
    return e.what();
  }
  return "";
}

TEST(OptionSchema, UnknownOrMistypedOptionsAreErrorsAtTheirLine) {
  EXPECT_EQ(suite_error("      schema_demo: {tile: 16, mode: fast, trace: true, ratio: 0.25}\n"),
            "");
  std::string e = suite_error("      schema_demo: {tiles: 16}\n");
  EXPECT_NE(e.find("opts.yaml:6:"), std::string::npos) << e;
  EXPECT_NE(e.find("plugin 'schema_demo' has no option 'tiles'"), std::string::npos) << e;
  e = suite_error("      schema_demo:\n        tile: sixteen\n");
  EXPECT_NE(e.find("opts.yaml:7:"), std::string::npos) << e;
  EXPECT_NE(e.find("option 'tile': 'sixteen' is not a int"), std::string::npos) << e;
  e = suite_error("      schema_demo: {mode: slow}\n");
  EXPECT_NE(e.find("'slow' is not one of exact fast"), std::string::npos) << e;
  e = suite_error("      cpu_reference: {threads: 4}\n");
  EXPECT_NE(e.find("option 'threads' is set by the host"), std::string::npos) << e;
  e = suite_error("      cpu_onednn: {verbose: 1}\n");
  EXPECT_NE(e.find("plugin 'cpu_onednn' has no option 'verbose' (its options: none)"),
            std::string::npos)
      << e;
}

// `inter_op_threads: -1` passed validate and failed the case when the plugin read it (issue 43):
// an integer option's declared range is checked at load, and a number with leading blanks (" 8",
// which the case id printed as "-8") is not a number.
TEST(OptionSchema, AnIntegerOutsideItsDeclaredRangeIsAnErrorAtItsLine) {
  EXPECT_EQ(suite_error("      schema_demo: {lanes: 1}\n"), "");
  EXPECT_EQ(suite_error("      schema_demo: {lanes: 64}\n"), "");
  std::string e = suite_error("      schema_demo:\n        lanes: 65\n");
  EXPECT_NE(e.find("opts.yaml:7:"), std::string::npos) << e;
  EXPECT_NE(e.find("plugin 'schema_demo' option 'lanes': 65 is out of range [1, 64]"),
            std::string::npos)
      << e;
  e = suite_error("      schema_demo: {lanes: -1}\n");
  EXPECT_NE(e.find("-1 is out of range [1, 64]"), std::string::npos) << e;
  e = suite_error("      schema_demo: {tile: \" 8\"}\n");
  EXPECT_NE(e.find("option 'tile': ' 8' is not a int"), std::string::npos) << e;
  e = suite_error("      schema_demo: {ratio: \" 0.5\"}\n");
  EXPECT_NE(e.find("option 'ratio': ' 0.5' is not a float"), std::string::npos) << e;
}

TEST(OptionSchema, APluginWithoutASchemaKeepsUncheckedOptions) {
  EXPECT_EQ(suite_error("      compat_v1_1: {anything: 1}\n"), "");
  EXPECT_EQ(suite_error("      not_installed: {anything: 1}\n"), "");
}

std::string run_command(const std::string& args) {
  std::string out;
  FILE* pipe =
      popen((DLHOST_BINARY " --plugin-path " + kFixtures + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  pclose(pipe);
  return out;
}

TEST(OptionSchema, PluginsVerboseListsOptionsAndCapabilities) {
  std::string out = run_command("plugins -v");
  EXPECT_NE(out.find("option tile (int, default \"8\"): rows per tile"), std::string::npos) << out;
  EXPECT_NE(out.find("option mode (enum exact|fast, default \"exact\"): how to round"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("option trace (bool, default none)"), std::string::npos) << out;
  EXPECT_NE(out.find("option lanes (int 1..64, default \"4\"): vector lanes"), std::string::npos)
      << out;
  EXPECT_NE(out.find("precision: fp32, bf16; 7 ops"), std::string::npos) << out;
  EXPECT_NE(out.find("options: none of its own"), std::string::npos) << out;
  json j = json::parse(run_command("plugins -v --json"));
  bool seen = false;
  for (const auto& p : j["plugins"])
    if (p["name"] == "schema_demo") {
      seen = true;
      EXPECT_EQ(p["options"][1]["choices"], json({"exact", "fast"}));
      EXPECT_EQ(p["capabilities"]["precisions"], "fp32, bf16");
    }
  EXPECT_TRUE(seen);
}

// --- precision ---------------------------------------------------------------------------------

// A backend without bf16 (cpu_reference; cpu_onednn has it where the CPU has bf16 products):
// conform says so for every problem instead of comparing fp32 results against bf16 tolerances.
TEST(Precision, ConformInAModeTheBackendLacksIsUnimplemented) {
  std::string out = run_command(
      "conform --backend cpu_reference --precision bf16 --ops fc --networks "
      "none --json /dev/null");
  EXPECT_NE(out.find("precision bf16"), std::string::npos) << out;
  EXPECT_NE(out.find("implements precision fp32; the case asks for bf16"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
}

json run_precision(const std::string& backend_name, const std::string& precision) {
  auto networks = dlhost::list_networks(registry());
  dlhost::RunContext ctx;
  ctx.registry = &registry();
  ctx.networks = &networks;
  dlhost::CaseSpec spec;
  spec.id = "precision";
  spec.params = json{{"network", "lenet"},
                     {"backend", backend_name},
                     {"batch", 4},
                     {"iterations", 2},
                     {"warmup", 0},
                     {"threads", 1},
                     {"precision", precision}};
  return dlhost::run_case(spec, ctx);
}

TEST(Precision, ACaseIsSkippedWhenTheBackendLacksItsMode) {
  json rec = run_precision("cpu_reference", "bf16");
  EXPECT_EQ(rec["status"], "SKIPPED");
  EXPECT_NE(rec["reason"].get<std::string>().find(
                "backend cpu_reference implements precision fp32; the case asks for bf16"),
            std::string::npos)
      << rec["reason"];
  rec = run_precision("cpu_reference", "fp32");
  ASSERT_EQ(rec["status"], "OK") << rec["reason"];
  EXPECT_EQ(rec["resolved"]["precision"], "fp32");
}

TEST(Precision, ABackendWithoutCapabilitiesRunsFp32Only) {
  json rec = run_precision("compat_v1_1", "tf32");
  EXPECT_EQ(rec["status"], "SKIPPED");
  EXPECT_NE(rec["reason"].get<std::string>().find("it publishes no capabilities: fp32 is assumed"),
            std::string::npos)
      << rec["reason"];
  EXPECT_EQ(run_precision("compat_v1_1", "fp32")["status"], "OK");
}

TEST(Precision, TheHostPassesTheModeAndTheKitChecksIt) {
  const auto& demo = backend("schema_demo");
  dlhost_options bf16, fp16;
  bf16.values = {{"precision", "bf16"}};
  EXPECT_NE(dlhost::create_context(demo, 0, bf16), nullptr);
  fp16.values = {{"precision", "fp16"}};
  try {
    dlhost::create_context(demo, 0, fp16);
    ADD_FAILURE() << "fp16 accepted";
  } catch (const dlhost::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_UNIMPLEMENTED);
  }
  // The kit refuses a mode its capabilities lack even when a host does not check first.
  dlhost_context* raw = nullptr;
  dlhost::StatusPtr refused(demo.table->backend->context_create(0, &fp16, &raw));
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->code, DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(refused->message.find("precision 'fp16' is not implemented"), std::string::npos);
  json options = json{{"precision", "fp16"}};
  dlhost_options set;
  dlhost::add_precision_options(options, set);
  EXPECT_EQ(set.values["precision"], "fp16");
  EXPECT_EQ(set.values["loss_scale"], "0");
}

}  // namespace

// ABI 1.4: the host tells a backend it may fuse the step only where nothing reads or changes
// the gradients between backward and update, and never a plugin built before 1.4.
TEST(FusedStep, OnlyOneRankWithoutCommOrReaderOnA14Plugin) {
  EXPECT_TRUE(dlhost::fused_step_allowed(4, "auto", 1, "none", false));
  EXPECT_TRUE(dlhost::fused_step_allowed(5, "auto", 1, "none", false));
  EXPECT_FALSE(dlhost::fused_step_allowed(3, "auto", 1, "none", false));  // minor 3: never
  EXPECT_FALSE(dlhost::fused_step_allowed(4, "off", 1, "none", false));   // the user's split
  EXPECT_FALSE(dlhost::fused_step_allowed(4, "auto", 2, "mpi", false));   // all-reduce between
  EXPECT_FALSE(dlhost::fused_step_allowed(4, "auto", 1, "mpi", false));   // comm on one rank
  EXPECT_FALSE(dlhost::fused_step_allowed(4, "auto", 1, "none", true));   // a gradient reader
  // Schema-declaring plugins receive it: it is host-set, refused under a case's `options`.
  EXPECT_TRUE(dlhost::is_host_set_option("fused_step"));
}
