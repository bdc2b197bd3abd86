// test_abi_loader.cpp — the ABI 1.2 loader, end to end: plugins built against the frozen 1.0 and
// 1.1 headers load into this host and train, and are never handed what their minor cannot see; a
// 1.2 plugin in a host that pretends to be 1.1 behaves as a 1.1 plugin; query() is lazy; and the
// defects issue 10 lists (a status with code OK, store_size, store_prefix per comm, the host's
// struct_size in param_buffers) stay fixed.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "core/compatibility.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/networks.h"
#include "core/plugin_registry.h"
#include "graph_attrs.h"
#include "run/runner.h"

namespace {

using dlhost::PluginRegistry;
using dlhost::test_attrs::fc;
using json = nlohmann::ordered_json;

const std::string kPlugins = DLHOST_TEST_PLUGIN_DIR;
const std::string kCompat = DLHOST_TEST_BINARY_DIR "/tests/abi_compat/libfixture_compat_v";
const std::string kFixtures = DLHOST_TEST_BINARY_DIR "/tests/abi/fixtures";

// A registry with the shipped plugins and `extra` files, in a host of ABI 1.`host_minor`.
std::unique_ptr<PluginRegistry> registry_with(std::vector<std::string> extra,
                                              uint32_t host_minor = DLHOST_ABI_MINOR) {
  auto r = std::make_unique<PluginRegistry>(host_minor);
  r->discover({kPlugins});
  for (const auto& f : extra) EXPECT_TRUE(r->load_file(f)) << f;
  return r;
}

const dlhost::LoadedPlugin& backend_of(const PluginRegistry& r, const std::string& name) {
  const auto* p = r.find(DLHOST_PLUGIN_BACKEND, name);
  if (p == nullptr) throw std::runtime_error("backend " + name + " did not load");
  return *p;
}

// One case run in this process, as a case worker runs it.
json run_one(const PluginRegistry& registry, json params) {
  auto networks =
      std::make_unique<std::vector<dlhost::NetworkRef>>(dlhost::list_networks(registry));
  dlhost::RunContext ctx;
  ctx.registry = &registry;
  ctx.networks = networks.get();
  dlhost::CaseSpec spec;
  spec.id = "abi_test";
  spec.params = std::move(params);
  json rec = dlhost::run_case(spec, ctx);
  dlhost::reset_store();
  return rec;
}

json small_case(const std::string& network, const std::string& backend, int batch = 4) {
  return json{{"network", network}, {"backend", backend}, {"batch", batch},
              {"iterations", 3},    {"warmup", 1},        {"threads", 1}};
}

std::string reason(const json& rec) { return rec["reason"].get<std::string>(); }

// --- compatibility: older plugins in this host ------------------------------------------------

TEST(AbiCompat, PluginsBuiltAgainst10And11LoadWithTheirMinor) {
  auto r = registry_with({kCompat + "1_0.so", kCompat + "1_1.so"});
  const auto& v10 = backend_of(*r, "compat_v1_0");
  const auto& v11 = backend_of(*r, "compat_v1_1");
  EXPECT_EQ(v10.abi_minor, 0u);
  EXPECT_EQ(v10.speaks_minor, 0u);
  EXPECT_EQ(v11.speaks_minor, 1u);
  // No extension is read from a plugin older than 1.2, and none is assumed.
  EXPECT_EQ(v11.extensions.option_schema, nullptr);
  EXPECT_FALSE(dlhost::backend_caps(v11).published);
}

TEST(AbiCompat, Backend10TrainsANetworkOf10Ops) {
  auto r = registry_with({kCompat + "1_0.so"});
  json rec = run_one(*r, small_case("lenet", "compat_v1_0"));
  ASSERT_EQ(rec["status"], "OK") << reason(rec);
  const auto& losses = rec["loss"]["values"];
  EXPECT_LT(losses.back().get<double>(), losses.front().get<double>());
}

TEST(AbiCompat, Backend10IsNeverHandedA11Op) {
  auto r = registry_with({kCompat + "1_0.so"});
  json rec = run_one(*r, small_case("resnet56", "compat_v1_0", 2));
  ASSERT_EQ(rec["status"], "SKIPPED") << reason(rec);
  EXPECT_NE(reason(rec).find("backend compat_v1_0 implements ABI 1.0; op batch_norm"),
            std::string::npos)
      << reason(rec);
  EXPECT_NE(reason(rec).find("needs 1.1"), std::string::npos) << reason(rec);
}

TEST(AbiCompat, Backend10IsNeverHandedAPerStepFc) {
  auto r = registry_with({kCompat + "1_0.so"});
  const auto* v10 = &backend_of(*r, "compat_v1_0");
  dlhost::GraphBuilder b("t", 2);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {3, 4});
  int32_t y = b.fc("fc", x, fc(2, true, 2));
  int32_t t = b.input("t", DLHOST_DTYPE_F32, {3, 2});
  b.mse_loss("loss", y, t);
  auto graph = b.finish();
  auto why = dlhost::abi_gap(*v10, *graph->view());
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("attribute fc.batch_dims=2"), std::string::npos) << *why;
}

TEST(AbiCompat, Backend11TrainsANetworkOf11Ops) {
  auto r = registry_with({kCompat + "1_1.so"});
  json rec = run_one(*r, small_case("resnet56", "compat_v1_1", 2));
  EXPECT_EQ(rec["status"], "OK") << reason(rec);
}

// --- a 1.2 plugin in a host that pretends to speak 1.1 ----------------------------------------

TEST(AbiCompat, Plugin12InA11HostBehavesAsA11Plugin) {
  auto r = registry_with({kFixtures + "/libfixture_schema_backend.so"}, 1);
  const auto& ref = backend_of(*r, "cpu_reference");
  const auto* demo = &backend_of(*r, "schema_demo");
  EXPECT_EQ(ref.abi_minor, static_cast<uint32_t>(DLHOST_ABI_MINOR));  // built against this SDK
  EXPECT_EQ(ref.speaks_minor, 1u);
  // Its extensions are not read: no option check, no capabilities (fp32 alone).
  EXPECT_EQ(demo->extensions.option_schema, nullptr);
  EXPECT_TRUE(demo->options.empty());
  EXPECT_FALSE(dlhost::backend_caps(*demo).published);
  EXPECT_TRUE(dlhost::precision_gap(*demo, "bf16").has_value());
  EXPECT_EQ(dlhost::check_plugin_option(*r, "schema_demo", "no_such", "1"), std::nullopt);
  // And it still trains.
  json rec = run_one(*r, small_case("lenet", "cpu_reference"));
  ASSERT_EQ(rec["status"], "OK") << reason(rec);
  EXPECT_LT(rec["loss"]["last"].get<double>(), rec["loss"]["warmup_first"].get<double>());
}

TEST(AbiCompat, HostPretending11HandsOutThe11HostTable) {
  const dlhost_host_api* old = dlhost::host_api(1);
  EXPECT_EQ(old->abi_minor, 1u);
  EXPECT_EQ(old->struct_size, DLHOST_HOST_API_STRUCT_SIZE_1_0);
  EXPECT_FALSE(DLHOST_HAS_FIELD(old, dlhost_host_api, store_size));
  EXPECT_EQ(dlhost::host_api()->abi_minor, static_cast<uint32_t>(DLHOST_ABI_MINOR));
}

// --- query() is lazy ---------------------------------------------------------------------------

int query_calls(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  auto calls = reinterpret_cast<int (*)()>(dlsym(handle, "fixture_query_calls"));
  int n = calls != nullptr ? calls() : -1;
  dlclose(handle);
  return n;
}

TEST(LazyQuery, APluginIsQueriedOnlyWhenLookedUpAndOnce) {
  const std::string path = kFixtures + "/libfixture_lazy_query.so";
  PluginRegistry r;
  ASSERT_TRUE(r.load_file(path));
  EXPECT_EQ(query_calls(path), 0) << "loading must not query";
  EXPECT_EQ(r.names(DLHOST_PLUGIN_BACKEND), std::vector<std::string>{"lazy_query"});
  EXPECT_EQ(query_calls(path), 0);
  const auto* p = r.find(DLHOST_PLUGIN_BACKEND, "lazy_query");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(query_calls(path), 1);
  EXPECT_FALSE(p->usable);
  EXPECT_EQ(p->unusable_reason, "lazy_query refuses every machine");
  r.find(DLHOST_PLUGIN_BACKEND, "lazy_query");
  r.probe_all();
  EXPECT_EQ(query_calls(path), 1) << "queried once, then remembered";
}

// `dlhost run` in its own processes: the case worker queries only the plugins its case uses.
TEST(LazyQuery, ACaseWorkerQueriesOnlyItsCasesPlugins) {
  const std::string dir = DLHOST_TEST_BINARY_DIR "/tests/abi/lazy_run";
  std::string mk = "rm -rf '" + dir + "' && mkdir -p '" + dir + "'";
  ASSERT_EQ(std::system(mk.c_str()), 0);
  std::ofstream(dir + "/suite.yaml")
      << "name: lazy\ncases:\n  - {network: lenet, backend: cpu_reference, batch: 4, "
         "iterations: 1, warmup: 0, threads: 1}\n";
  const std::string cmd =
      "FIXTURE_QUERY_LOG='" + dir + "/queries.log' " DLHOST_BINARY " --plugin-path '" + kFixtures +
      "' run '" + dir + "/suite.yaml' -o '" + dir + "/out.jsonl' > '" + dir + "/stdout.txt' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "see " << dir << "/stdout.txt";
  std::ifstream results(dir + "/out.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(results, line));
  EXPECT_EQ(json::parse(line)["status"], "OK") << line;
  std::ifstream log(dir + "/queries.log");
  int parent = 0, worker = 0;
  while (std::getline(log, line))
    (line.find("case-worker") != std::string::npos ? worker : parent)++;
  EXPECT_GE(parent, 1) << "the fixture was not found: the test proves nothing";
  EXPECT_EQ(worker, 0) << "the case worker queried a plugin its case does not use";
}

// --- defects of issue 10 -----------------------------------------------------------------------

TEST(AbiDefects, AStatusWithCodeOkIsRecordedAsInternal) {
  dlhost::StatusPtr s(dlhost::host_api()->status_create(DLHOST_CODE_OK, "all fine"));
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->code, DLHOST_CODE_INTERNAL);
  EXPECT_NE(s->message.find("code OK"), std::string::npos) << s->message;
  EXPECT_NE(s->message.find("all fine"), std::string::npos) << s->message;
}

TEST(AbiDefects, StoreSizeWaitsAndTimesOut) {
  dlhost::reset_store();
  const dlhost_host_api* h = dlhost::host_api();
  size_t size = 7;
  dlhost::StatusPtr late(h->store_size("absent", 10, &size));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->code, DLHOST_CODE_DEADLINE_EXCEEDED);
  EXPECT_EQ(size, 7u);
  ASSERT_EQ(h->store_set("k", "12345", 5), nullptr);
  EXPECT_EQ(h->store_size("k", 0, &size), nullptr);
  EXPECT_EQ(size, 5u);
  dlhost::reset_store();
}

// store_check sets "<store_prefix>rank/0": without a prefix per comm, the second comm's init
// would fail with ALREADY_EXISTS.
TEST(AbiDefects, TwoCommsOfOneCaseHaveTheirOwnStoreKeys) {
  dlhost::reset_store();
  auto r = registry_with({DLHOST_TEST_BINARY_DIR "/tests/fixture_comms/libfixture_store_comm.so"});
  const auto* comm = r->find(DLHOST_PLUGIN_COMM, "store_check");
  ASSERT_NE(comm, nullptr);
  dlhost::RankEnv world;
  dlhost::CommSession first(*comm, world), second(*comm, world);
  EXPECT_NE(first.store_prefix(), second.store_prefix());
  size_t size = 0;
  for (const auto* c : {&first, &second}) {
    const std::string key = c->store_prefix() + "rank/0";
    EXPECT_EQ(dlhost::host_api()->store_size(key.c_str(), 0, &size), nullptr) << key;
  }
  dlhost::reset_store();
}

// A host that knows an older, shorter dlhost_buffer asks with its own struct_size; the backend
// must fill only what that covers and leave struct_size alone.
class ParamBuffers : public ::testing::TestWithParam<const char*> {};

TEST_P(ParamBuffers, TheBackendKeepsTheHostsStructSize) {
  auto r = registry_with({});
  const auto* backend = &backend_of(*r, GetParam());
  dlhost::GraphBuilder b("t", 2);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {3});
  int32_t y = b.fc("fc", x, fc(2));
  b.mse_loss("loss", y, b.input("t", DLHOST_DTYPE_F32, {2}));
  auto graph = b.finish();
  dlhost_options opts;
  opts.values = {{"threads", "1"}, {"seed", "1"}};
  dlhost_optimizer_desc sgd{};
  sgd.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  sgd.kind = DLHOST_OPTIMIZER_SGD;
  sgd.learning_rate = 0.1f;
  auto context = dlhost::create_context(*backend, 0, opts);
  auto model = dlhost::compile_model(*backend, context.get(), graph->view(), sgd, opts);

  dlhost_buffer value, grad;
  std::memset(&value, 0xAB, sizeof value);
  std::memset(&grad, 0xAB, sizeof grad);
  const size_t old_size = offsetof(dlhost_buffer, dtype);  // a view with data and bytes only
  value.struct_size = grad.struct_size = old_size;
  dlhost::check_status(backend->table->backend->param_buffers(model.get(), 0, &value, &grad),
                       "param_buffers");
  EXPECT_EQ(value.struct_size, old_size);
  EXPECT_EQ(grad.struct_size, old_size);
  EXPECT_GE(value.bytes, graph->param_bytes(0));
  int32_t untouched;
  std::memset(&untouched, 0xAB, sizeof untouched);
  EXPECT_EQ(value.dtype, untouched) << "a field past the host's struct_size was written";
  EXPECT_EQ(grad.device, untouched) << "a field past the host's struct_size was written";

  // read_param's byte count follows the parameter's dtype (F32 master weights).
  std::vector<float> w(static_cast<size_t>(graph->param(0).count));
  EXPECT_EQ(graph->param_bytes(0), w.size() * sizeof(float));
  dlhost::check_status(backend->table->backend->read_param(model.get(), 0, DLHOST_PARAM_VALUE,
                                                           w.data(), graph->param_bytes(0)),
                       "read_param");
}

INSTANTIATE_TEST_SUITE_P(Backends, ParamBuffers, ::testing::Values("cpu_reference", "cpu_onednn"));

}  // namespace
