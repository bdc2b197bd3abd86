// test_plugin_kit.cpp — the SDK's plugin kits (backend_kit.hpp, comm_kit.hpp, cpu_info.hpp) on
// their own (framework_kit.hpp's pieces too), through the C tables they fill, with a minimal host
// table made here: so the test needs nothing of host/ and checks exactly what a third-party plugin
// gets. What it pins: every exception becomes a status with the right code (sdk::Error keeps its
// code, std::bad_alloc is RESOURCE_EXHAUSTED, anything else INTERNAL), NULL handles and
// out-parameters are INVALID_ARGUMENT naming the call, device indices are checked, model_info fills
// only what the caller's struct_size covers, versions come from PluginInfo and library(), and the
// CPU is described from one parse.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "dlhost/backend_kit.hpp"
#include "dlhost/comm_kit.hpp"
#include "dlhost/cpu_kit.hpp"
#include "dlhost/framework_kit.hpp"
#include "dlhost/graph_access.hpp"
#include "dlhost/network_kit.hpp"

namespace {

namespace sdk = dlhost::sdk;

// --- a minimal host ----------------------------------------------------------------------------

struct Status {
  int32_t code;
  std::string message;
};
dlhost_status* status_create(int32_t code, const char* message) {
  return reinterpret_cast<dlhost_status*>(new Status{code, message ? message : ""});
}
int32_t status_code(const dlhost_status* s) { return reinterpret_cast<const Status*>(s)->code; }
const char* status_message(const dlhost_status* s) {
  return reinterpret_cast<const Status*>(s)->message.c_str();
}
void status_destroy(dlhost_status* s) { delete reinterpret_cast<Status*>(s); }
void log(int32_t, const char*, const char*) {}
int32_t log_enabled(int32_t) { return 0; }
// A test's options are a map behind the opaque pointer (the host's own type is not needed).
using OptionMap = std::map<std::string, std::string>;
const char* option_get(const dlhost_options* options, const char* key) {
  if (options == nullptr) return nullptr;
  const auto& values = *reinterpret_cast<const OptionMap*>(options);
  auto it = values.find(key);
  return it == values.end() ? nullptr : it->second.c_str();
}

const dlhost_host_api* host() {
  static const dlhost_host_api h = [] {
    auto t = sdk::make_struct<dlhost_host_api>(DLHOST_HOST_API_STRUCT_SIZE);
    t.abi_major = DLHOST_ABI_MAJOR;
    t.abi_minor = DLHOST_ABI_MINOR;
    t.status_create = status_create;
    t.status_code = status_code;
    t.status_message = status_message;
    t.status_destroy = status_destroy;
    t.log = log;
    t.log_enabled = log_enabled;
    t.option_get = option_get;
    return t;
  }();
  return &h;
}

// The code of a status (OK for NULL), releasing it; its message in *message.
int32_t code_of(dlhost_status* s, std::string* message = nullptr) {
  if (s == nullptr) return DLHOST_CODE_OK;
  const int32_t code = status_code(s);
  if (message != nullptr) *message = status_message(s);
  status_destroy(s);
  return code;
}

// --- a backend whose model throws what it is told to -------------------------------------------

struct Context {};

class ThrowingModel final : public sdk::Model {
 public:
  void set_input(int32_t, const void*, size_t) override {}
  void forward() override { throw std::bad_alloc(); }
  void backward(const dlhost_grad_ready*) override {
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "device lost");
  }
  void update() override { throw std::runtime_error("broken invariant"); }
  void synchronize() override { throw 42; }  // not even a std::exception
  float loss() const override { return 1.5f; }
  void param_buffers(int32_t, dlhost_buffer*, dlhost_buffer*) override {}
  void read_param(int32_t, int32_t, void*, size_t) override {}
  void write_param(int32_t, int32_t, const void*, size_t) override {}
  sdk::ModelInfo info() const override {
    sdk::ModelInfo i;
    i.threads = 3;
    i.implementation = "fake";
    i.param_bytes = 10;
    i.workspace_bytes = 5;
    return i;
  }
};

class FakeBackend final : public sdk::Backend<Context> {
 public:
  int32_t device_count() const override { return 2; }
  sdk::Device device(int32_t index) const override {
    return sdk::cpu_device("generic", "cpu" + std::to_string(index));
  }
  std::string library() const override { return "fakelib 1.2.3"; }
  int32_t query() const override { return 7; }
  std::unique_ptr<Context> open(int32_t, const sdk::Options&) override {
    return std::make_unique<Context>();
  }
  std::unique_ptr<sdk::Model> compile(Context&, const dlhost_graph& graph,
                                      const dlhost_optimizer_desc&, const sdk::Options&) override {
    if (graph.num_nodes > 0) sdk::unimplemented("fake: no ops at all");
    if (graph.num_nodes < 0) return nullptr;  // a vendor's bug the kit must name
    return std::make_unique<ThrowingModel>();
  }
};

const dlhost_plugin* backend_plugin() {
  static const dlhost_plugin* p =
      sdk::backend_plugin<FakeBackend>(host(), {"fake_backend", "9.8.7", "a test double"});
  return p;
}

TEST(BackendKit, FillsThePluginTableFromOnePlace) {
  const dlhost_plugin* p = backend_plugin();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->struct_size, DLHOST_PLUGIN_STRUCT_SIZE);
  EXPECT_EQ(p->abi_major, uint32_t{DLHOST_ABI_MAJOR});
  EXPECT_EQ(p->kind, DLHOST_PLUGIN_BACKEND);
  EXPECT_STREQ(p->name, "fake_backend");
  EXPECT_STREQ(p->version, "9.8.7");
  ASSERT_NE(p->backend, nullptr);
  EXPECT_EQ(p->comm, nullptr);
  EXPECT_EQ(p->backend->struct_size, DLHOST_BACKEND_API_STRUCT_SIZE);
  int32_t priority = 0;
  EXPECT_EQ(code_of(p->query(&priority)), DLHOST_CODE_OK);
  EXPECT_EQ(priority, 7);
}

TEST(BackendKit, DescribesDevicesOnceWithTheLibraryVersion) {
  const dlhost_backend_api* b = backend_plugin()->backend;
  EXPECT_EQ(b->device_count(), 2);
  const dlhost_device_info* first = nullptr;
  const dlhost_device_info* again = nullptr;
  ASSERT_EQ(code_of(b->device_info(1, &first)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(b->device_info(1, &again)), DLHOST_CODE_OK);
  EXPECT_EQ(first, again);  // built once, lives with the library
  EXPECT_EQ(first->index, 1);
  EXPECT_STREQ(first->name, "cpu1");
  EXPECT_STREQ(first->library, "fakelib 1.2.3");
  EXPECT_EQ(first->cores, sdk::cpu_info().cores);
  EXPECT_EQ(first->memory_bytes, sdk::cpu_info().memory_bytes);
  std::string message;
  EXPECT_EQ(code_of(b->device_info(2, &first), &message), DLHOST_CODE_OUT_OF_RANGE);
  EXPECT_NE(message.find("device 2 does not exist"), std::string::npos) << message;
  EXPECT_EQ(code_of(b->device_info(-1, &first)), DLHOST_CODE_OUT_OF_RANGE);
  EXPECT_EQ(code_of(b->device_info(0, nullptr), &message), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(message, "fake_backend: device_info: out is NULL");
}

// A compiled ThrowingModel with its context, destroyed through the table.
struct Compiled {
  const dlhost_backend_api* b = backend_plugin()->backend;
  dlhost_context* context = nullptr;
  dlhost_model* model = nullptr;
  Compiled() {
    EXPECT_EQ(code_of(b->context_create(0, nullptr, &context)), DLHOST_CODE_OK);
    auto graph = sdk::make_struct<dlhost_graph>(DLHOST_GRAPH_STRUCT_SIZE);
    auto opt = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
    EXPECT_EQ(code_of(b->compile(context, &graph, &opt, nullptr, &model)), DLHOST_CODE_OK);
  }
  ~Compiled() {
    b->model_destroy(model);
    b->context_destroy(context);
  }
};

TEST(BackendKit, TurnsEveryExceptionIntoItsStatusCode) {
  Compiled c;
  ASSERT_NE(c.model, nullptr);
  std::string message;
  EXPECT_EQ(code_of(c.b->forward(c.model)), DLHOST_CODE_RESOURCE_EXHAUSTED);
  EXPECT_EQ(code_of(c.b->backward(c.model, nullptr), &message), DLHOST_CODE_UNAVAILABLE);
  EXPECT_EQ(message, "device lost");
  EXPECT_EQ(code_of(c.b->update(c.model), &message), DLHOST_CODE_INTERNAL);
  EXPECT_EQ(message, "broken invariant");
  EXPECT_EQ(code_of(c.b->synchronize(c.model)), DLHOST_CODE_INTERNAL);
  float loss = 0;  // read_loss synchronizes first, so it fails the same way
  EXPECT_EQ(code_of(c.b->read_loss(c.model, &loss)), DLHOST_CODE_INTERNAL);
  EXPECT_EQ(loss, 0.0f);  // out-parameters untouched on error
  uint64_t bytes = 0;
  EXPECT_EQ(code_of(c.b->memory_in_use(c.model, &bytes)), DLHOST_CODE_OK);
  EXPECT_EQ(bytes, 15u);
}

TEST(BackendKit, ChecksHandlesAndGraphs) {
  const dlhost_backend_api* b = backend_plugin()->backend;
  std::string message;
  EXPECT_EQ(code_of(b->forward(nullptr), &message), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(message, "fake_backend: forward: model is NULL");
  b->model_destroy(nullptr);  // accepted, as the ABI says
  b->context_destroy(nullptr);
  Compiled c;
  auto graph = sdk::make_struct<dlhost_graph>(DLHOST_GRAPH_STRUCT_SIZE);
  auto opt = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  dlhost_model* m = nullptr;
  EXPECT_EQ(code_of(b->compile(c.context, &graph, nullptr, nullptr, &m)),
            DLHOST_CODE_INVALID_ARGUMENT);
  graph.struct_size = 8;
  EXPECT_EQ(code_of(b->compile(c.context, &graph, &opt, nullptr, &m)),
            DLHOST_CODE_INVALID_ARGUMENT);
  graph.struct_size = DLHOST_GRAPH_STRUCT_SIZE;
  graph.num_nodes = 1;  // FakeBackend knows no op
  EXPECT_EQ(code_of(b->compile(c.context, &graph, &opt, nullptr, &m)), DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_EQ(m, nullptr);
}

TEST(BackendKit, NullModelFromCompileIsRefusedAtCompile) {
  Compiled c;
  auto graph = sdk::make_struct<dlhost_graph>(DLHOST_GRAPH_STRUCT_SIZE);
  auto opt = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  graph.num_nodes = -1;  // FakeBackend returns no model
  dlhost_model* m = nullptr;
  std::string message;
  EXPECT_EQ(code_of(c.b->compile(c.context, &graph, &opt, nullptr, &m), &message),
            DLHOST_CODE_INTERNAL);
  EXPECT_NE(message.find("fake_backend: compile returned no model"), std::string::npos) << message;
  EXPECT_EQ(m, nullptr);
}

// A kit plugin handed a host of another major returns the table's fixed first fields, so that
// the host refuses it naming both versions, instead of NULL ("could not initialize").
class OtherMajorBackend final : public sdk::Backend<Context> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "none"; }
  std::unique_ptr<Context> open(int32_t, const sdk::Options&) override { return nullptr; }
  std::unique_ptr<sdk::Model> compile(Context&, const dlhost_graph&, const dlhost_optimizer_desc&,
                                      const sdk::Options&) override {
    return nullptr;
  }
};

TEST(BackendKit, HostOfAnotherMajorGetsTheVersionsToRefuseWith) {
  dlhost_host_api other = *host();
  other.abi_major = DLHOST_ABI_MAJOR + 1;
  const dlhost_plugin* p =
      sdk::backend_plugin<OtherMajorBackend>(&other, {"other_major", "1.0", "a test double"});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->abi_major, uint32_t{DLHOST_ABI_MAJOR});
  EXPECT_EQ(p->abi_minor, uint32_t{DLHOST_ABI_MINOR});
  EXPECT_STREQ(p->name, "other_major");
  EXPECT_EQ(p->backend, nullptr);  // nothing the other host could misread
}

TEST(BackendKit, ModelInfoFillsOnlyWhatTheCallerHas) {
  Compiled c;
  dlhost_model_info info{};
  info.struct_size = DLHOST_STRUCT_SIZE(dlhost_model_info, threads);  // an older caller
  info.implementation = "untouched";
  ASSERT_EQ(code_of(c.b->model_info(c.model, &info)), DLHOST_CODE_OK);
  EXPECT_EQ(info.threads, 3);
  EXPECT_STREQ(info.implementation, "untouched");
  EXPECT_EQ(info.param_bytes, 0u);
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  ASSERT_EQ(code_of(c.b->model_info(c.model, &info)), DLHOST_CODE_OK);
  EXPECT_STREQ(info.implementation, "fake");
  EXPECT_EQ(info.workspace_bytes, 5u);
}

// --- a comm ------------------------------------------------------------------------------------

class PendingRequest final : public sdk::Request {
 public:
  bool test() override { return ++polls_ >= 2; }
  void wait() override { throw std::length_error("collective failed"); }

 private:
  int polls_ = 0;
};

class FakeComm final : public sdk::Comm {
 public:
  std::unique_ptr<sdk::Request> all_reduce(const void*, void*, uint64_t, int32_t, int32_t,
                                           int32_t) override {
    return std::make_unique<PendingRequest>();
  }
  std::unique_ptr<sdk::Request> broadcast(void*, uint64_t, int32_t, int32_t, int32_t) override {
    sdk::unimplemented("no broadcast");
  }
  std::unique_ptr<sdk::Request> all_gather(const void*, void*, uint64_t, int32_t,
                                           int32_t) override {
    throw std::bad_alloc();
  }
  std::unique_ptr<sdk::Request> barrier() override { return sdk::completed(); }
};

class FakeComms final : public sdk::CommPlugin {
 public:
  sdk::CommCaps capabilities() const override { return {}; }
  std::string library() const override { return "fakecomm 0.1"; }
  std::optional<std::vector<sdk::OptionSpec>> options() const override {
    return std::vector<sdk::OptionSpec>{{"timeout_s", DLHOST_OPTION_FLOAT, "300", "seconds"}};
  }
  // The comm's own extension goes into the kit's chain, beside the option schema (comm_nccl's
  // group and abort calls), instead of a copied plugin table.
  void link_extensions(sdk::ExtensionChain& chain) const override {
    static dlhost_comm_abort_ext abort_ext = [] {
      auto e = sdk::make_struct<dlhost_comm_abort_ext>(DLHOST_COMM_ABORT_EXT_STRUCT_SIZE);
      e.type = DLHOST_EXT_COMM_ABORT;
      e.abort = [](dlhost_comm*) {};
      return e;
    }();
    chain.link(&abort_ext);
  }
  std::unique_ptr<sdk::Comm> init(const dlhost_comm_init_args&) override {
    return std::make_unique<FakeComm>();
  }
};

TEST(CommKit, PublishesTheOptionSchemaAndTheCommsOwnExtensions) {
  const dlhost_plugin* p = sdk::comm_plugin<FakeComms>(host(), {"fake_comm", "0.2.0", "double"});
  ASSERT_NE(p, nullptr);
  std::vector<int32_t> types;
  for (const dlhost_extension* e = p->extensions; e != nullptr; e = e->next)
    types.push_back(e->type);
  EXPECT_EQ(types, (std::vector<int32_t>{DLHOST_EXT_COMM_ABORT, DLHOST_EXT_OPTION_SCHEMA}));
}

TEST(CommKit, FillsTheTableAndMapsErrors) {
  const dlhost_plugin* p = sdk::comm_plugin<FakeComms>(host(), {"fake_comm", "0.2.0", "double"});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind, DLHOST_PLUGIN_COMM);
  EXPECT_STREQ(p->version, "0.2.0");
  const dlhost_comm_api* c = p->comm;
  auto caps = sdk::make_struct<dlhost_comm_caps>(DLHOST_COMM_CAPS_STRUCT_SIZE);
  ASSERT_EQ(code_of(c->capabilities(&caps)), DLHOST_CODE_OK);
  EXPECT_STREQ(caps.library, "fakecomm 0.1");
  EXPECT_EQ(caps.host_memory, 1);
  EXPECT_EQ(caps.dtypes, 1u << DLHOST_DTYPE_F32);

  auto args = sdk::make_struct<dlhost_comm_init_args>(DLHOST_COMM_INIT_ARGS_STRUCT_SIZE);
  dlhost_comm* comm = nullptr;
  ASSERT_EQ(code_of(c->init(&args, &comm)), DLHOST_CODE_OK);
  float x = 1;
  dlhost_request* r = nullptr;
  std::string message;
  EXPECT_EQ(code_of(c->all_reduce(comm, &x, &x, 1, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM,
                                  DLHOST_MEMORY_HOST, nullptr),
                    &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(message, "fake_comm: all_reduce: request is NULL");
  ASSERT_EQ(code_of(c->all_reduce(comm, &x, &x, 1, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM,
                                  DLHOST_MEMORY_HOST, &r)),
            DLHOST_CODE_OK);
  int32_t done = -1;
  EXPECT_EQ(code_of(c->test(r, &done)), DLHOST_CODE_OK);
  EXPECT_EQ(done, 0);
  EXPECT_EQ(code_of(c->test(r, &done)), DLHOST_CODE_OK);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(code_of(c->wait(r)), DLHOST_CODE_INTERNAL);
  c->request_free(r);
  EXPECT_EQ(code_of(c->broadcast(comm, &x, 1, DLHOST_DTYPE_F32, 0, DLHOST_MEMORY_HOST, &r)),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_EQ(code_of(c->all_gather(comm, &x, &x, 1, DLHOST_DTYPE_F32, DLHOST_MEMORY_HOST, &r)),
            DLHOST_CODE_RESOURCE_EXHAUSTED);
  ASSERT_EQ(code_of(c->barrier(comm, &r)), DLHOST_CODE_OK);
  EXPECT_EQ(code_of(c->wait(r)), DLHOST_CODE_OK);
  c->request_free(r);
  c->request_free(nullptr);
  c->finalize(comm);
  EXPECT_EQ(code_of(c->barrier(nullptr, &r)), DLHOST_CODE_INVALID_ARGUMENT);
}

// --- dlhost.hpp's Builder on an older host ---------------------------------------------------

int fc_calls = 0;
dlhost_status* count_fc(dlhost_graph_builder*, const char*, int32_t, const dlhost_fc_attrs*,
                        int32_t* out) {
  ++fc_calls;
  *out = 1;
  return nullptr;
}

TEST(Builder, PerStepFcRefusesAHostThatPredatesIt) {
  (void)backend_plugin();  // attaches the host table the Builder's check() uses
  auto api = sdk::make_struct<dlhost_builder_api>(DLHOST_BUILDER_API_STRUCT_SIZE_1_0);
  api.fc = count_fc;
  sdk::Builder old_host(&api, nullptr);
  EXPECT_EQ(old_host.fc("fc", 0, 4), 1);  // 1.0 calls still work
  try {
    old_host.fc_per_step("fc_t", 0, 4);
    ADD_FAILURE() << "a 1.0 host would have built a per-sample FC";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_UNIMPLEMENTED);
    EXPECT_NE(std::string(e.what()).find("fc_per_step"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fc_calls, 1);
  api.struct_size = DLHOST_BUILDER_API_STRUCT_SIZE;
  sdk::Builder new_host(&api, nullptr);
  EXPECT_EQ(new_host.fc_per_step("fc_t", 0, 4), 1);
  EXPECT_EQ(fc_calls, 2);
}

// An integer option in its range is its value, an absent one the fallback; out of range or not an
// integer is INVALID_ARGUMENT naming the plugin, the key and (out of range) value and range.
TEST(PluginKit, IntOptionInRangeOrAnErrorNamingTheKey) {
  ASSERT_NE(backend_plugin(), nullptr);  // the host attached
  const OptionMap values{{"threads", "2"}, {"inter_op_threads", "5000"}, {"seed", "two"}};
  const sdk::Options options(reinterpret_cast<const dlhost_options*>(&values));
  EXPECT_EQ(options.get_int_in("threads", 0, 0, sdk::kMaxThreads), 2);
  EXPECT_EQ(options.get_int_in("absent", 7, 0, 8), 7);
  const auto error_of = [&](const char* key, int64_t lo, int64_t hi) -> std::string {
    try {
      options.get_int_in(key, 0, lo, hi);
    } catch (const sdk::Error& e) {
      EXPECT_EQ(e.code(), DLHOST_CODE_INVALID_ARGUMENT);
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of("inter_op_threads", 0, sdk::kMaxThreads),
            std::string(sdk::detail::plugin_name()) +
                ": option inter_op_threads=5000 out of range [0, 4096]");
  EXPECT_EQ(error_of("threads", 3, 8),
            std::string(sdk::detail::plugin_name()) + ": option threads=2 out of range [3, 8]");
  EXPECT_NE(error_of("seed", 0, 8).find("option 'seed' must be an integer, got 'two'"),
            std::string::npos);
}

// strtoll and strtod skip leading blanks: `seq: " 8"` ran as 8 while the case id said "seq=-8"
// (issue 43). A number written with them is text, as the host's schema check says too.
TEST(PluginKit, NumbersWithLeadingBlanksAreNotNumbers) {
  ASSERT_NE(backend_plugin(), nullptr);  // the host attached
  const OptionMap values{{"seq", " 8"}, {"dropout", "\t0.5"}, {"steps", "8"}};
  const auto* raw = reinterpret_cast<const dlhost_options*>(&values);
  EXPECT_EQ(sdk::option_int(raw, "steps", 0), 8);
  const auto error_of = [&](auto&& read) -> std::string {
    try {
      read();
    } catch (const sdk::Error& e) {
      EXPECT_EQ(e.code(), DLHOST_CODE_INVALID_ARGUMENT);
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(error_of([&] { sdk::option_int(raw, "seq", 0); }),
            "option 'seq' must be an integer, got ' 8'");
  EXPECT_EQ(error_of([&] { sdk::option_double(raw, "dropout", 0); }),
            "option 'dropout' must be a number, got '\t0.5'");
  // The free functions above are aliases of Options, the one API: the same words.
  const sdk::Options options(raw);
  EXPECT_EQ(options.get_int("steps", 0), 8);
  EXPECT_EQ(error_of([&] { options.get_int("seq"); }), "option 'seq' must be an integer, got ' 8'");
  EXPECT_EQ(error_of([&] { options.get_double("dropout", 0); }),
            "option 'dropout' must be a number, got '\t0.5'");
}

// Options reads every type, each absent key its fallback, and NULL options as all absent; a
// value not of its type is refused naming the key; the free functions answer the same.
TEST(PluginKit, OptionsReadEachTypeAndTheAliasesAgree) {
  ASSERT_NE(backend_plugin(), nullptr);  // the host attached
  const OptionMap values{
      {"on", "true"}, {"off", "0"}, {"rate", "0.25"}, {"name", "x"}, {"flag", "yes"}};
  const auto* raw = reinterpret_cast<const dlhost_options*>(&values);
  const sdk::Options options(raw);
  EXPECT_TRUE(options.get_bool("on", false));
  EXPECT_FALSE(options.get_bool("off", true));
  EXPECT_TRUE(options.get_bool("absent", true));
  EXPECT_EQ(options.get_double("rate", 1), 0.25);
  EXPECT_EQ(options.get_string("name", "y"), "x");
  EXPECT_EQ(options.get_string("absent", "y"), "y");
  EXPECT_FALSE(options.get_int("absent"));
  EXPECT_EQ(sdk::option(raw, "name"), options.get("name"));
  EXPECT_EQ(sdk::option_bool(raw, "on", false), true);
  EXPECT_EQ(sdk::option_double(raw, "rate", 1), 0.25);
  try {
    options.get_bool("flag", false);
    ADD_FAILURE() << "'yes' read as a flag";
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_INVALID_ARGUMENT);
    EXPECT_STREQ(e.what(), "option 'flag' must be true or false, got 'yes'");
  }
  const sdk::Options none(nullptr);
  EXPECT_FALSE(none.get("name"));
  EXPECT_EQ(none.get_int("seq", 3), 3);
  EXPECT_EQ(none.get_double("rate", 1), 1);
  EXPECT_EQ(none.get_string("name", "y"), "y");
}

// One NCHW tensor [2, 3, 7, 6] feeding one node, for the graph accessors.
struct OneNodeGraph {
  dlhost_tensor_desc x = sdk::make_struct<dlhost_tensor_desc>(DLHOST_TENSOR_DESC_STRUCT_SIZE);
  const dlhost_tensor_desc* tensors[1] = {&x};
  int32_t inputs[1] = {0};
  // A weight and a bias the node may own (set_params gives their element counts).
  dlhost_param_desc weight = sdk::make_struct<dlhost_param_desc>(DLHOST_PARAM_DESC_STRUCT_SIZE);
  dlhost_param_desc bias = sdk::make_struct<dlhost_param_desc>(DLHOST_PARAM_DESC_STRUCT_SIZE);
  const dlhost_param_desc* params[2] = {&weight, &bias};
  int32_t param_ids[2] = {0, 1};
  dlhost_node node = sdk::make_struct<dlhost_node>(DLHOST_NODE_STRUCT_SIZE);
  dlhost_graph graph = sdk::make_struct<dlhost_graph>(DLHOST_GRAPH_STRUCT_SIZE);
  OneNodeGraph(int32_t op, const void* attrs) {
    x.rank = 4;
    x.dims[0] = 2, x.dims[1] = 3, x.dims[2] = 7, x.dims[3] = 6;
    node.op = op;
    node.name = "n1";
    node.num_inputs = 1;
    node.inputs = inputs;
    node.attrs = attrs;
    graph.num_tensors = 1;
    graph.tensors = tensors;
    graph.params = params;
  }
  void set_params(int64_t weight_count, int64_t bias_count = -1) {
    weight.count = weight_count;
    bias.count = bias_count;
    node.num_params = bias_count < 0 ? 1 : 2;
    node.params = param_ids;
    graph.num_params = node.num_params;
  }
};

std::string thrown_by(const std::function<void()>& f) {
  try {
    f();
  } catch (const sdk::Error& e) {
    return e.what();
  }
  return "<nothing thrown>";
}

TEST(GraphAccess, Conv2dGeometryWithStrideDilationAndGroups) {
  auto a = sdk::make_struct<dlhost_conv2d_attrs>(DLHOST_CONV2D_ATTRS_STRUCT_SIZE);
  a.out_channels = 6, a.kernel_h = 3, a.kernel_w = 2, a.stride_h = 2, a.stride_w = 1;
  a.pad_h = 1, a.pad_w = 0, a.dilation_h = 2, a.dilation_w = 1, a.groups = 3;
  OneNodeGraph g(DLHOST_OP_CONV2D, &a);
  g.set_params(6 * 1 * 3 * 2);  // W [OC, C / groups, KH, KW], no bias
  sdk::Geometry2d geo = sdk::conv2d_geometry(g.graph, g.node);
  EXPECT_EQ(geo.n, 2);
  EXPECT_EQ(geo.c, 3);
  EXPECT_EQ(geo.oc, 6);
  EXPECT_EQ(geo.oh, (7 + 2 - 2 * 2 - 1) / 2 + 1);  // 3, PyTorch's formula
  EXPECT_EQ(geo.ow, 5);
  EXPECT_EQ(geo.groups, 3);
  a.groups = 4;  // 3 channels do not split into 4 groups
  EXPECT_NE(thrown_by([&] { sdk::conv2d_geometry(g.graph, g.node); }).find("group"),
            std::string::npos);
}

TEST(GraphAccess, Conv2dRefusesAWeightOfAnotherSizeOrAMissingBias) {
  auto a = sdk::make_struct<dlhost_conv2d_attrs>(DLHOST_CONV2D_ATTRS_STRUCT_SIZE);
  a.out_channels = 4, a.kernel_h = a.kernel_w = 3, a.stride_h = a.stride_w = 1;
  a.dilation_h = a.dilation_w = 1, a.groups = 1, a.has_bias = 1;
  OneNodeGraph g(DLHOST_OP_CONV2D, &a);
  g.set_params(4 * 3 * 3 * 3, 4);
  EXPECT_EQ(sdk::conv2d_geometry(g.graph, g.node).oh, 5);
  g.set_params(4 * 3 * 3 * 3 - 1, 4);
  std::string why = thrown_by([&] { sdk::conv2d_geometry(g.graph, g.node); });
  EXPECT_NE(why.find("node 'n1' parameter 0 has 107 elements, its geometry needs 108"),
            std::string::npos)
      << why;
  g.set_params(4 * 3 * 3 * 3);  // has_bias but one parameter
  why = thrown_by([&] { sdk::conv2d_geometry(g.graph, g.node); });
  EXPECT_NE(why.find("lacks parameter 1"), std::string::npos) << why;
}

TEST(GraphAccess, FcGeometryFlattensAfterTheKeptDims) {
  auto a = sdk::make_struct<dlhost_fc_attrs>(DLHOST_FC_ATTRS_STRUCT_SIZE);
  a.out_features = 5, a.has_bias = 1, a.batch_dims = 1;
  OneNodeGraph g(DLHOST_OP_FC, &a);
  g.set_params(5 * 3 * 7 * 6, 5);
  sdk::FcGeometry fc = sdk::fc_geometry(g.graph, g.node);
  EXPECT_EQ(fc.rows, 2);
  EXPECT_EQ(fc.in, 3 * 7 * 6);  // the fan-in: C x H x W
  EXPECT_EQ(fc.out, 5);
  EXPECT_TRUE(fc.bias);
  a.batch_dims = 2;  // per position of [N, C, ...]: rows N x C
  g.set_params(5 * 7 * 6, 5);
  fc = sdk::fc_geometry(g.graph, g.node);
  EXPECT_EQ(fc.rows, 2 * 3);
  EXPECT_EQ(fc.in, 7 * 6);
  a.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE_1_0;  // a 1.0 host: no batch_dims, 1 kept
  g.set_params(5 * 3 * 7 * 6, 5);
  EXPECT_EQ(sdk::fc_geometry(g.graph, g.node).rows, 2);
  a.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE, a.batch_dims = 4;  // keeps every dim: no features
  EXPECT_NE(thrown_by([&] { sdk::fc_geometry(g.graph, g.node); }).find("keeps 4 leading dims"),
            std::string::npos);
}

TEST(GraphAccess, Pool2dCeilModeDropsAWindowInThePadding) {
  auto a = sdk::make_struct<dlhost_pool2d_attrs>(DLHOST_POOL2D_ATTRS_STRUCT_SIZE);
  a.kind = DLHOST_POOL_MAX, a.kernel_h = a.kernel_w = 2, a.stride_h = a.stride_w = 2;
  OneNodeGraph g(DLHOST_OP_POOL2D, &a);
  EXPECT_EQ(sdk::pool2d_geometry(g.graph, g.node).oh, 3);  // floor(5 / 2) + 1
  a.ceil_mode = 1;
  EXPECT_EQ(sdk::pool2d_geometry(g.graph, g.node).oh, 4);  // ceil(5 / 2) + 1
  EXPECT_EQ(sdk::pool2d_geometry(g.graph, g.node).ow, 3);  // 6: exact either way
  a.pad_h = 1;  // ceil(7 / 2) + 1 = 5, but window 5 would start at 8 >= 7 + 1: dropped
  EXPECT_EQ(sdk::pool2d_geometry(g.graph, g.node).oh, 4);
}

// Every ABI 1.4 attribute struct has its line in AttrsMinSize, so node_attrs reads it checked.
template <class Attrs>
void expect_truncated_refused(int32_t op, size_t full_size) {
  auto a = sdk::make_struct<Attrs>(full_size);
  OneNodeGraph g(op, &a);
  EXPECT_EQ(&sdk::node_attrs<Attrs>(g.node), &a);
  a.struct_size = full_size - 1;
  EXPECT_NE(thrown_by([&] { sdk::node_attrs<Attrs>(g.node); }).find("has truncated attributes"),
            std::string::npos)
      << sdk::op_name(op);
}

TEST(GraphAccess, TransformerAttributesAreReadChecked) {
  expect_truncated_refused<dlhost_layer_norm_attrs>(DLHOST_OP_LAYER_NORM,
                                                    DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE);
  expect_truncated_refused<dlhost_gelu_attrs>(DLHOST_OP_GELU, DLHOST_GELU_ATTRS_STRUCT_SIZE);
  expect_truncated_refused<dlhost_attention_attrs>(DLHOST_OP_ATTENTION,
                                                   DLHOST_ATTENTION_ATTRS_STRUCT_SIZE);
  expect_truncated_refused<dlhost_position_embedding_attrs>(
      DLHOST_OP_POSITION_EMBEDDING, DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE);
  expect_truncated_refused<dlhost_tied_fc_attrs>(DLHOST_OP_TIED_FC,
                                                 DLHOST_TIED_FC_ATTRS_STRUCT_SIZE);
}

TEST(GraphAccess, RefusesTruncatedAttributesAndWrongInputs) {
  auto a = sdk::make_struct<dlhost_conv2d_attrs>(DLHOST_CONV2D_ATTRS_STRUCT_SIZE);
  a.struct_size = 16;
  OneNodeGraph g(DLHOST_OP_CONV2D, &a);
  std::string why = thrown_by([&] { sdk::node_attrs<dlhost_conv2d_attrs>(g.node); });
  EXPECT_NE(why.find("node 'n1' (conv2d) has truncated attributes"), std::string::npos) << why;
  g.node.attrs = nullptr;
  why = thrown_by([&] { sdk::node_attrs<dlhost_conv2d_attrs>(g.node); });
  EXPECT_NE(why.find("has no attributes"), std::string::npos) << why;
  g.inputs[0] = 5;
  why = thrown_by([&] { sdk::expect_inputs(g.graph, g.node, 1); });
  EXPECT_NE(why.find("input 0 is tensor 5, out of range"), std::string::npos) << why;
  why = thrown_by([&] { sdk::expect_inputs(g.graph, g.node, 2); });
  EXPECT_NE(why.find("has 1 inputs, its op takes 2"), std::string::npos) << why;
}

TEST(CpuKit, ClipsTheRawGradientThenAddsWeightDecayThenMomentum) {
  auto opt = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  opt.learning_rate = 0.5f, opt.momentum = 0.9f, opt.weight_decay = 0.1f, opt.clip_norm = 1.0f;
  float grad[2] = {3.0f, 4.0f};  // norm 5: scaled by 1/5, weight decay not in the norm
  float value[2] = {1.0f, -2.0f};
  float velocity[2] = {1.0f, 0.0f};
  const double scale = sdk::clip_scale(sdk::sum_of_squares(grad, 2), opt.clip_norm);
  EXPECT_DOUBLE_EQ(scale, 0.2);
  sdk::sgd_step(opt, scale, grad, value, velocity, 2);
  // step0 = 0.6 + 0.1 = 0.7, v0 = 0.9 + 0.7 = 1.6; step1 = 0.8 - 0.2 = 0.6, v1 = 0.6.
  EXPECT_FLOAT_EQ(velocity[0], 1.6f);
  EXPECT_FLOAT_EQ(velocity[1], 0.6f);
  EXPECT_FLOAT_EQ(value[0], 1.0f - 0.5f * 1.6f);
  EXPECT_FLOAT_EQ(value[1], -2.0f - 0.5f * 0.6f);
  EXPECT_DOUBLE_EQ(sdk::clip_scale(1e6, 0.0f), 1.0);   // off
  EXPECT_DOUBLE_EQ(sdk::clip_scale(0.25, 1.0f), 1.0);  // norm 0.5: below the bound
}

TEST(Graph, OpNamesFollowTheEnum) {
  EXPECT_EQ(sdk::op_name(DLHOST_OP_INPUT), "input");
  EXPECT_EQ(sdk::op_name(DLHOST_OP_CONV2D), "conv2d");
  EXPECT_EQ(sdk::op_name(DLHOST_OP_SOFTMAX_CROSS_ENTROPY), "softmax_cross_entropy");
  EXPECT_EQ(sdk::op_name(DLHOST_OP_GLOBAL_AVG_POOL), "global_avg_pool");  // the last of 1.1
  EXPECT_EQ(sdk::op_name(DLHOST_OP_LAYER_NORM), "layer_norm");            // the first of 1.4
  EXPECT_EQ(sdk::op_name(DLHOST_OP_TIED_FC), "tied_fc");                  // the last of 1.4
  EXPECT_EQ(sdk::op_name(DLHOST_OP_TIED_FC + 1), "op 20");
  EXPECT_EQ(sdk::op_name(0), "op 0");
}

TEST(CpuInfo, DescribesThisMachine) {
  const sdk::CpuInfo& cpu = sdk::cpu_info();
  EXPECT_EQ(&cpu, &sdk::cpu_info());  // parsed once
  EXPECT_GE(cpu.cores, 1);
  EXPECT_GT(cpu.memory_bytes, 0u);
  EXPECT_FALSE(cpu.model.empty());
#if defined(__x86_64__)
  // Every x86-64 CPU has SSE2; a parse that lost the flags line would miss it.
  EXPECT_TRUE(cpu.has("sse2")) << cpu.flags.size() << " flags read";
  EXPECT_NE(cpu.best_isa(), "");
#endif
}

}  // namespace

// --- the network kit -------------------------------------------------------------------------

// What the fake builder's `input` saw: the network's per-sample dims.
std::vector<int64_t>& built_dims() {
  static std::vector<int64_t> dims;
  return dims;
}

std::vector<sdk::Network> two_networks() {
  auto wide = [](sdk::Builder& b, const sdk::Options& o) {
    b.input("data", {o.get_int("width", 3)});
  };
  auto broken = [](sdk::Builder&, const sdk::Options&) { sdk::unimplemented("needs an op"); };
  return {{"wide", "MNIST", 64, 256, sdk::sgd_optimizer(0.05f, 0.9f, 1e-4f, 5.0f), wide, "w"},
          {"broken", "synthetic", 8, 8, sdk::adamw_optimizer(1e-3f, 0.01f, 1e-8f), broken, "b"}};
}

TEST(NetworkKit, FillsTheTableFromTheList) {
  const dlhost_plugin* p = sdk::network_plugin<two_networks>(host(), {"nets", "1.2.3", "two"});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->kind, DLHOST_PLUGIN_NETWORK);
  EXPECT_STREQ(p->version, "1.2.3");
  const dlhost_network_api& api = *p->network;
  ASSERT_EQ(api.count(), 2);
  const dlhost_network_info* info = nullptr;
  ASSERT_EQ(code_of(api.info(0, &info)), DLHOST_CODE_OK);
  EXPECT_STREQ(info->name, "wide");
  EXPECT_EQ(info->cpu_batch, 64);
  EXPECT_EQ(info->gpu_batch, 256);
  EXPECT_EQ(info->optimizer->kind, DLHOST_OPTIMIZER_SGD);
  EXPECT_FLOAT_EQ(info->optimizer->momentum, 0.9f);
  EXPECT_FLOAT_EQ(info->optimizer->clip_norm, 5.0f);
  ASSERT_EQ(code_of(api.info(1, &info)), DLHOST_CODE_OK);
  EXPECT_EQ(info->optimizer->kind, DLHOST_OPTIMIZER_ADAMW);
  EXPECT_FLOAT_EQ(info->optimizer->beta2, 0.999f);
  std::string message;
  EXPECT_EQ(code_of(api.info(2, &info), &message), DLHOST_CODE_OUT_OF_RANGE);
  EXPECT_NE(message.find("nets: info: no network 2 (2 network(s))"), std::string::npos) << message;
  EXPECT_EQ(code_of(api.info(0, nullptr)), DLHOST_CODE_INVALID_ARGUMENT);
}

TEST(NetworkKit, BuildsWithTheCasesOptionsAndChecksTheBuilder) {
  const dlhost_plugin* p = sdk::network_plugin<two_networks>(host(), {"nets", "1.2.3", "two"});
  auto builder = sdk::make_struct<dlhost_builder_api>(DLHOST_BUILDER_API_STRUCT_SIZE);
  builder.input = [](dlhost_graph_builder*, const char*, int32_t, int32_t rank, const int64_t* dims,
                     int32_t* out) -> dlhost_status* {
    built_dims().assign(dims, dims + rank);
    *out = 0;
    return nullptr;
  };
  ASSERT_EQ(code_of(p->network->build(0, &builder, nullptr, nullptr)), DLHOST_CODE_OK);
  EXPECT_EQ(built_dims(), std::vector<int64_t>{3});  // no options: the builder's fallback
  std::string message;
  EXPECT_EQ(code_of(p->network->build(1, &builder, nullptr, nullptr), &message),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(message.find("needs an op"), std::string::npos) << message;
  EXPECT_EQ(code_of(p->network->build(0, nullptr, nullptr, nullptr), &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("builder table missing"), std::string::npos) << message;
  EXPECT_EQ(code_of(p->network->build(-1, &builder, nullptr, nullptr)), DLHOST_CODE_OUT_OF_RANGE);
}

// --- the CPU kit's model ------------------------------------------------------------------------

// x [2, 2] (input) and the loss sum(x * w), w one parameter of 4: forward and backward by hand.
struct DotGraph {
  dlhost_tensor_desc x = sdk::make_struct<dlhost_tensor_desc>(DLHOST_TENSOR_DESC_STRUCT_SIZE);
  dlhost_tensor_desc loss = sdk::make_struct<dlhost_tensor_desc>(DLHOST_TENSOR_DESC_STRUCT_SIZE);
  dlhost_param_desc w = sdk::make_struct<dlhost_param_desc>(DLHOST_PARAM_DESC_STRUCT_SIZE);
  const dlhost_tensor_desc* tensors[2] = {&x, &loss};
  const dlhost_param_desc* params[1] = {&w};
  int32_t inputs[1] = {0};
  dlhost_graph graph = sdk::make_struct<dlhost_graph>(DLHOST_GRAPH_STRUCT_SIZE);
  DotGraph() {
    x.dtype = loss.dtype = DLHOST_DTYPE_F32;
    x.rank = 2, x.dims[0] = 2, x.dims[1] = 2, x.name = "x";
    loss.id = 1, loss.name = "loss";
    w.count = 4;
    graph.num_tensors = 2, graph.tensors = tensors;
    graph.num_params = 1, graph.params = params;
    graph.num_inputs = 1, graph.inputs = inputs;
    graph.loss = 1;
  }
};

class DotModel final : public sdk::CpuModel {
 public:
  using CpuModel::CpuModel;
  void forward() override {
    double s = 0;
    for (size_t i = 0; i < 4; ++i) s += double(tensor(0).value[i]) * param(0).value[i];
    tensor(1).value[0] = float(s);
  }
  void backward(const dlhost_grad_ready* ready) override {
    begin_backward();
    for (size_t i = 0; i < 4; ++i) param(0).grad[i] = tensor(1).grad[0] * tensor(0).value[i];
    grad_ready(ready, {0});
  }
};

TEST(CpuKit, CpuModelHoldsTheBuffersAndStepsSgdInTheDocumentedOrder) {
  DotGraph g;
  auto opt = sdk::sgd_optimizer(0.5f, 0.9f, 0.1f, 1.0f);  // clipping bites: ||g|| = ||x|| = 5.48
  DotModel m(g.graph, opt);
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1};
  m.set_input(0, x, sizeof x);
  m.write_param(0, DLHOST_PARAM_VALUE, w, sizeof w);
  m.forward();
  EXPECT_FLOAT_EQ(m.loss(), 10.0f);
  int calls = 0;
  dlhost_grad_ready ready{DLHOST_GRAD_READY_STRUCT_SIZE, &calls,
                          [](void* user, int32_t) { ++*static_cast<int*>(user); }};
  m.backward(&ready);
  EXPECT_EQ(calls, 1);
  m.update();
  float after[4];
  m.read_param(0, DLHOST_PARAM_VALUE, after, sizeof after);
  const double scale = 1.0 / std::sqrt(30.0);  // clip on the raw gradient x
  for (int i = 0; i < 4; ++i)                  // v = scale g + wd w (no velocity yet); w -= lr v
    EXPECT_NEAR(after[i], 1.0 - 0.5 * (scale * x[i] + 0.1 * 1.0), 1e-6) << i;
  float read[4];
  m.read_tensor(0, read, sizeof read);
  EXPECT_EQ(read[3], 4.0f);
  dlhost_buffer value = sdk::make_struct<dlhost_buffer>(DLHOST_BUFFER_STRUCT_SIZE);
  m.param_buffers(0, &value, nullptr);
  EXPECT_EQ(value.bytes, 16u);
  EXPECT_EQ(value.memory_space, DLHOST_MEMORY_HOST);
}

TEST(CpuKit, CpuModelRefusesWrongSizesInputsAndOptimizers) {
  DotGraph g;
  DotModel m(g.graph, sdk::sgd_optimizer(0.1f));
  const float x[4] = {};
  EXPECT_NE(thrown_by([&] { m.set_input(0, x, 12); }).find("x takes 16 bytes, got 12"),
            std::string::npos);
  EXPECT_NE(thrown_by([&] { m.set_input(1, x, 4); }).find("tensor 1 is not an input"),
            std::string::npos);
  EXPECT_NE(thrown_by([&] { m.write_param(0, DLHOST_PARAM_VALUE, nullptr, 16); }).find("got NULL"),
            std::string::npos);
  EXPECT_NE(
      thrown_by([&] { m.read_param(1, DLHOST_PARAM_VALUE, nullptr, 16); }).find("no parameter 1"),
      std::string::npos);
  EXPECT_NE(thrown_by([&] { m.write_param(0, 7, x, 16); }).find("unknown parameter part 7"),
            std::string::npos);
  EXPECT_NE(thrown_by([&] {
              DotModel(g.graph, sdk::adamw_optimizer(1e-3f, 0.f, 1e-8f));
            }).find("SGD only"),
            std::string::npos);
}

// --- the backend kit's device virtuals ----------------------------------------------------------

// A model that says where its stream is and how much it holds; every other device call takes
// the kit's CPU defaults.
class StreamModel final : public sdk::Model {
 public:
  void set_input(int32_t, const void*, size_t) override {}
  void forward() override {}
  void backward(const dlhost_grad_ready*) override {}
  void update() override {}
  void synchronize() override { ++synchronized; }
  float loss() const override { return 0; }
  void param_buffers(int32_t, dlhost_buffer*, dlhost_buffer*) override {}
  void read_param(int32_t, int32_t, void*, size_t) override {}
  void write_param(int32_t, int32_t, const void*, size_t) override {}
  sdk::ModelInfo info() const override {
    sdk::ModelInfo i;
    i.param_bytes = 96;
    return i;
  }
  dlhost_stream model_stream() override {
    auto s = sdk::make_struct<dlhost_stream>(DLHOST_STREAM_STRUCT_SIZE);
    s.kind = DLHOST_STREAM_HOST_QUEUE, s.device = 0, s.handle = this;
    return s;
  }
  int synchronized = 0;
};

class DeviceBackend final : public sdk::Backend<sdk::NoContext> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "devlib 1.0"; }
  bool device_virtuals() const override { return true; }
  std::unique_ptr<sdk::NoContext> open(int32_t, const sdk::Options&) override {
    return std::make_unique<sdk::NoContext>();
  }
  std::unique_ptr<sdk::Model> compile(sdk::NoContext&, const dlhost_graph&,
                                      const dlhost_optimizer_desc&, const sdk::Options&) override {
    return std::make_unique<StreamModel>();
  }
};

template <class Ext>
const Ext* find(const dlhost_plugin* p, int32_t type) {
  return reinterpret_cast<const Ext*>(dlhost_find_extension(p->extensions, type));
}

TEST(BackendKit, PublishesTheDeviceVirtualsWithCpuDefaults) {
  // A backend that does not ask for them publishes none (gpu_cudnn links its own).
  EXPECT_EQ(find<dlhost_stream_ext>(backend_plugin(), DLHOST_EXT_STREAM), nullptr);
  const dlhost_plugin* p = sdk::backend_plugin<DeviceBackend>(host(), {"dev", "1.0", "double"});
  const auto* stream = find<dlhost_stream_ext>(p, DLHOST_EXT_STREAM);
  const auto* events = find<dlhost_events_ext>(p, DLHOST_EXT_EVENTS);
  const auto* memory = find<dlhost_device_memory_ext>(p, DLHOST_EXT_DEVICE_MEMORY);
  ASSERT_TRUE(stream && events && memory);
  EXPECT_EQ(memory->struct_size, DLHOST_DEVICE_MEMORY_EXT_STRUCT_SIZE);
  dlhost_context* context = nullptr;
  dlhost_model* model = nullptr;
  ASSERT_EQ(code_of(p->backend->context_create(0, nullptr, &context)), DLHOST_CODE_OK);
  auto graph = sdk::make_struct<dlhost_graph>(DLHOST_GRAPH_STRUCT_SIZE);
  auto opt = sdk::sgd_optimizer(0.1f);
  ASSERT_EQ(code_of(p->backend->compile(context, &graph, &opt, nullptr, &model)), DLHOST_CODE_OK);

  auto s = sdk::make_struct<dlhost_stream>(DLHOST_STREAM_STRUCT_SIZE);
  ASSERT_EQ(code_of(stream->model_stream(model, &s)), DLHOST_CODE_OK);
  EXPECT_EQ(s.kind, DLHOST_STREAM_HOST_QUEUE);
  EXPECT_EQ(s.handle, static_cast<void*>(reinterpret_cast<sdk::Model*>(model)));

  // Events on the host clock, after the model synchronized.
  dlhost_event *start = nullptr, *end = nullptr;
  ASSERT_EQ(code_of(events->event_create(model, &start)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(events->event_create(model, &end)), DLHOST_CODE_OK);
  double ms = -1;
  std::string message;
  EXPECT_EQ(code_of(events->event_elapsed_ms(start, end, &ms), &message),
            DLHOST_CODE_FAILED_PRECONDITION);
  EXPECT_NE(message.find("never recorded"), std::string::npos) << message;
  ASSERT_EQ(code_of(events->event_record(start)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(events->event_record(end)), DLHOST_CODE_OK);
  int32_t done = 0;
  ASSERT_EQ(code_of(events->event_query(end, &done)), DLHOST_CODE_OK);
  EXPECT_EQ(done, 1);
  ASSERT_EQ(code_of(events->event_elapsed_ms(start, end, &ms)), DLHOST_CODE_OK);
  EXPECT_GE(ms, 0.0);
  EXPECT_EQ(reinterpret_cast<StreamModel*>(model)->synchronized, 2);
  events->event_destroy(start);
  events->event_destroy(end);

  // Memory: statistics from memory_in_use, host buffers, copies with and without the model.
  auto stats = sdk::make_struct<dlhost_memory_stats>(DLHOST_MEMORY_STATS_STRUCT_SIZE);
  ASSERT_EQ(code_of(memory->memory_stats(model, &stats)), DLHOST_CODE_OK);
  EXPECT_EQ(stats.in_use_bytes, 96u);
  auto buffer = sdk::make_struct<dlhost_buffer>(DLHOST_BUFFER_STRUCT_SIZE);
  ASSERT_EQ(code_of(memory->buffer_alloc(context, 16, DLHOST_DTYPE_F32, &buffer)), DLHOST_CODE_OK);
  EXPECT_EQ(buffer.memory_space, DLHOST_MEMORY_HOST);
  const float in[2] = {1.5f, -2.0f};
  float out[2] = {};
  ASSERT_EQ(code_of(memory->copy_from_host(context, nullptr, in, &buffer, 8, 8)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(memory->copy_to_host(context, model, &buffer, 8, out, 8)), DLHOST_CODE_OK);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(code_of(memory->copy_to_host(context, nullptr, &buffer, 12, out, 8), &message),
            DLHOST_CODE_OUT_OF_RANGE);
  EXPECT_NE(message.find("bytes [12, 20) of a buffer of 16"), std::string::npos) << message;
  auto on_device = buffer;
  on_device.memory_space = DLHOST_MEMORY_DEVICE;  // the defaults never touch device memory
  EXPECT_EQ(code_of(memory->copy_device(model, &buffer, 0, &on_device, 0, 4)),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_EQ(code_of(memory->input_buffer(model, 0, &buffer)), DLHOST_CODE_UNIMPLEMENTED);
  memory->buffer_free(context, &buffer);
  p->backend->model_destroy(model);
  p->backend->context_destroy(context);
}

// --- framework_kit.hpp: the glue of a backend over a framework ---------------------------------

namespace {

// ids [3] -> wte (embedding, vocab 5: p0) -> fc (p1 weight, p2 bias) -> head (tied to wte's
// table p0, its own bias p3) -> cross-entropy against labels [3] of 4 classes... whose logits
// have 5 (the vocab): the labels' bound is the logits' last dim. Tensors: 0 ids, 1 words, 2 h,
// 3 logits, 4 labels, 5 loss.
struct TiedGraph {
  dlhost_tensor_desc t[6];
  const dlhost_tensor_desc* tensors[6];
  dlhost_param_desc p[4];
  const dlhost_param_desc* params[4];
  dlhost_embedding_attrs wte_attrs{DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE, 5, 2};
  int32_t in_ids[1] = {0}, in_fc[1] = {1}, in_head[2] = {2, 1}, in_loss[2] = {3, 4};
  int32_t wte_params[1] = {0}, fc_params[2] = {1, 2}, head_params[2] = {0, 3};
  dlhost_node n[4];
  const dlhost_node* nodes[4];
  int32_t inputs[2] = {0, 4};
  dlhost_graph graph = sdk::make_struct<dlhost_graph>(DLHOST_GRAPH_STRUCT_SIZE);
  TiedGraph() {
    const char* names[6] = {"ids", "words", "h", "logits", "labels", "loss"};
    for (int32_t i = 0; i < 6; ++i) {
      t[i] = sdk::make_struct<dlhost_tensor_desc>(DLHOST_TENSOR_DESC_STRUCT_SIZE);
      t[i].id = i, t[i].name = names[i], t[i].rank = 2, t[i].dims[0] = 1, t[i].dims[1] = 3;
      t[i].dtype = i == 0 || i == 4 ? DLHOST_DTYPE_I32 : DLHOST_DTYPE_F32;
      tensors[i] = &t[i];
    }
    t[3].rank = 3, t[3].dims[2] = 5;  // logits [1, 3, vocab]
    const int32_t owner[4] = {0, 1, 1, 2}, counts[4] = {10, 4, 2, 5};
    for (int32_t i = 0; i < 4; ++i) {
      p[i] = sdk::make_struct<dlhost_param_desc>(DLHOST_PARAM_DESC_STRUCT_SIZE);
      p[i].id = i, p[i].node = owner[i], p[i].count = counts[i];
      params[i] = &p[i];
    }
    const auto node = [](int32_t op, const char* name, int32_t num_in, const int32_t* in,
                         int32_t out, int32_t num_params, const int32_t* ps, const void* attrs) {
      auto d = sdk::make_struct<dlhost_node>(DLHOST_NODE_STRUCT_SIZE);
      d.op = op, d.name = name, d.num_inputs = num_in, d.inputs = in, d.output = out;
      d.num_params = num_params, d.params = ps, d.attrs = attrs;
      return d;
    };
    n[0] = node(DLHOST_OP_EMBEDDING, "wte", 1, in_ids, 1, 1, wte_params, &wte_attrs);
    n[1] = node(DLHOST_OP_FC, "fc", 1, in_fc, 2, 2, fc_params, nullptr);
    n[2] = node(DLHOST_OP_TIED_FC, "head", 2, in_head, 3, 2, head_params, nullptr);
    n[3] = node(DLHOST_OP_SOFTMAX_CROSS_ENTROPY, "loss", 2, in_loss, 5, 0, nullptr, nullptr);
    for (int32_t i = 0; i < 4; ++i) nodes[i] = &n[i];
    graph.num_tensors = 6, graph.tensors = tensors;
    graph.num_params = 4, graph.params = params;
    graph.num_nodes = 4, graph.nodes = nodes;
    graph.num_inputs = 2, graph.inputs = inputs;
    graph.loss = 5;
  }
};

// Layers last to first, each node's own parameters in its order; the tied table (p0, listed by
// wte and head) once, at wte, its owner: head's bias, fc's weight and bias, then the table.
TEST(FrameworkKit, ReadyOrderIsLayersLastToFirstWithATiedTableOnceAtItsOwner) {
  TiedGraph g;
  const sdk::ParamTable table(g.graph);
  EXPECT_EQ(table.ready_order(), (std::vector<int32_t>{3, 1, 2, 0}));
  EXPECT_EQ(table.size(), 4u);
  EXPECT_EQ(table.count(0), 10);
}

TEST(FrameworkKit, ParamTableRefusesIdsSizesAndPartsNamingThem) {
  TiedGraph g;
  const sdk::ParamTable table(g.graph);
  const std::string who = std::string(sdk::detail::plugin_name()) + ": ";
  float data[10] = {};
  EXPECT_EQ(table.access(3, DLHOST_PARAM_GRAD, data, 20), 3u);
  EXPECT_EQ(thrown_by([&] { table.index(4); }), who + "no parameter 4 (the graph has 4)");
  EXPECT_EQ(thrown_by([&] { table.index(-1); }), who + "no parameter -1 (the graph has 4)");
  EXPECT_EQ(thrown_by([&] { table.access(1, DLHOST_PARAM_VALUE, data, 12); }),
            who + "parameter 1 takes 16 bytes, got 12");
  EXPECT_EQ(thrown_by([&] { table.access(1, DLHOST_PARAM_VALUE, nullptr, 16); }),
            who + "parameter 1 takes 16 bytes, got NULL");
  EXPECT_EQ(thrown_by([&] { table.access(1, 7, data, 16); }), who + "unknown parameter part 7");
}

// Notices go out in the ready order whatever order the parameters become final in; finish()
// sends the rest; without a listener nothing is called.
TEST(FrameworkKit, GradReadyNoticesKeepTheOrderWhateverFinishesFirst) {
  TiedGraph g;
  sdk::GradReadyNotices notices(sdk::ParamTable(g.graph).ready_order());
  std::vector<int32_t> seen;
  const dlhost_grad_ready ready{DLHOST_GRAD_READY_STRUCT_SIZE, &seen, [](void* user, int32_t p) {
                                  static_cast<std::vector<int32_t>*>(user)->push_back(p);
                                }};
  notices.begin(&ready);
  EXPECT_TRUE(notices.listening());
  notices.final(1);  // fc's weight before head's bias: held back
  EXPECT_TRUE(seen.empty());
  notices.final(3);
  EXPECT_EQ(seen, (std::vector<int32_t>{3, 1}));
  notices.finish();
  EXPECT_EQ(seen, (std::vector<int32_t>{3, 1, 2, 0}));
  seen.clear();
  notices.begin(nullptr);
  EXPECT_FALSE(notices.listening());
  notices.finish();
  EXPECT_TRUE(seen.empty());
}

// Labels lie below the logits' classes, token ids below the vocabulary; the message names the
// input, the id and its position.
TEST(FrameworkKit, IdInputsAreBoundedByTheirConsumers) {
  TiedGraph g;
  g.wte_attrs.vocab = 7;  // the ids' bound; the labels' is the logits' 5
  const sdk::IdInputs ids(g.graph);
  EXPECT_TRUE(ids.holds(0));
  EXPECT_FALSE(ids.holds(1));
  EXPECT_EQ(ids.limit(0), 7);
  EXPECT_EQ(ids.limit(4), 5);
  const int32_t good[3] = {0, 4, 6}, bad[3] = {0, 5, 1}, negative[3] = {2, 1, -1};
  EXPECT_EQ(thrown_by([&] { ids.check(0, good, 3); }), "<nothing thrown>");
  EXPECT_EQ(thrown_by([&] { ids.check(4, bad, 3); }),
            std::string(sdk::detail::plugin_name()) +
                ": input 'labels': id 5 at position 1 is outside [0, 5)");
  EXPECT_NE(thrown_by([&] { ids.check(0, negative, 3); }).find("id -1 at position 2"),
            std::string::npos);
  EXPECT_EQ(thrown_by([&] { ids.check(1, bad, 3); }), "<nothing thrown>");  // not an id input
  g.in_ids[0] = 4;  // the labels embedded too, into a vocabulary of 3: the smaller bound holds
  g.wte_attrs.vocab = 3;
  EXPECT_EQ(sdk::IdInputs(g.graph).limit(4), 3);
}

// The mask is a function of (seed, node, step, index) alone: the same seed gives the same mask,
// another seed or step another; kept elements are scaled by 1/(1-p); a range fill is the whole's.
TEST(FrameworkKit, DropoutMasksAreDeterministicFromTheSeed) {
  const size_t n = 4096;
  const auto mask = [&](uint64_t seed, uint64_t step) {
    std::vector<float> m(n, -1.0f);
    sdk::DropoutMask{seed, 3, step, 0.25f}.fill(m.data(), n);
    return m;
  };
  const std::vector<float> a = mask(42, 0);
  EXPECT_EQ(a, mask(42, 0));
  EXPECT_NE(a, mask(43, 0));
  EXPECT_NE(a, mask(42, 1));
  size_t dropped = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(a[i] == 0.0f || a[i] == 1.0f / 0.75f) << i << ": " << a[i];
    EXPECT_EQ(a[i] == 0.0f, !dlhost_dropout_keep(42, 3, 0, i, 0.25f)) << i;
    dropped += a[i] == 0.0f;
  }
  EXPECT_NEAR(double(dropped) / n, 0.25, 0.03);
  std::vector<float> part(n, -1.0f);
  const sdk::DropoutMask draw{42, 3, 0, 0.25f};
  draw.fill(part.data(), 100, 200);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(part[i], i >= 100 && i < 200 ? a[i] : -1.0f) << i;
  EXPECT_EQ(draw.at(150), a[150]);
}

TEST(FrameworkKit, HostSettingsAreTypedAndFallBackOnTheContexts) {
  ASSERT_NE(backend_plugin(), nullptr);  // the host attached
  const OptionMap set{{"threads", "3"}, {"seed", "7"}, {"precision", "bf16"}, {"fused_step", "1"}};
  const sdk::HostSettings s =
      sdk::host_settings(sdk::Options(reinterpret_cast<const dlhost_options*>(&set)));
  EXPECT_EQ(s.threads, 3);
  EXPECT_EQ(s.seed, 7);
  EXPECT_EQ(s.precision, "bf16");
  EXPECT_TRUE(s.fused_step);
  const sdk::HostSettings none = sdk::host_settings(sdk::Options(nullptr), s);
  EXPECT_EQ(none.threads, 3);
  EXPECT_EQ(none.seed, 7);
  EXPECT_EQ(none.precision, "bf16");
  EXPECT_EQ(sdk::host_settings(sdk::Options(nullptr)).seed, 42);  // the runner's default
  const OptionMap many{{"threads", "5000"}};
  EXPECT_NE(thrown_by([&] {
              sdk::host_settings(sdk::Options(reinterpret_cast<const dlhost_options*>(&many)));
            }).find("option threads=5000 out of range [0, 4096]"),
            std::string::npos);
}

// The optimizer kind the capabilities lack is refused naming it, as is a precision; negative
// settings are INVALID_ARGUMENT.
TEST(FrameworkKit, CompileRefusesAnOptimizerOrPrecisionTheCapabilitiesLack) {
  sdk::Capabilities caps = sdk::fp32_capabilities(DLHOST_OP_TIED_FC);  // SGD only
  const sdk::HostSettings fp32;
  const dlhost_optimizer_desc adamw = sdk::adamw_optimizer(0.001f, 0.01f, 1e-8f);
  const auto code_and_message = [&](const sdk::HostSettings& h, const dlhost_optimizer_desc& o) {
    try {
      sdk::check_compile(caps, h, o);
    } catch (const sdk::Error& e) {
      return std::to_string(e.code()) + " " + e.what();
    }
    return std::string("ok");
  };
  const std::string who = std::string(sdk::detail::plugin_name()) + ": ";
  EXPECT_EQ(code_and_message(fp32, adamw), std::to_string(DLHOST_CODE_UNIMPLEMENTED) + " " + who +
                                               "optimizer kind 2 (adamw) not supported");
  EXPECT_EQ(code_and_message(fp32, sdk::sgd_optimizer(0.1f)), "ok");
  caps.optimizers |= sdk::bit(DLHOST_OPTIMIZER_ADAMW);
  EXPECT_EQ(code_and_message(fp32, adamw), "ok");
  dlhost_optimizer_desc unknown = adamw;
  unknown.kind = 77;
  EXPECT_NE(code_and_message(fp32, unknown).find("optimizer kind 77 (unknown)"), std::string::npos);
  sdk::HostSettings bf16;
  bf16.precision = "bf16";
  EXPECT_EQ(code_and_message(bf16, adamw), std::to_string(DLHOST_CODE_UNIMPLEMENTED) + " " + who +
                                               "precision bf16 is not implemented");
  EXPECT_EQ(code_and_message(fp32, sdk::sgd_optimizer(0.1f, -0.9f)),
            std::to_string(DLHOST_CODE_INVALID_ARGUMENT) + " " + who +
                "negative momentum, weight_decay or clip_norm");
}

// A framework backend: the context keeps its host settings, compile falls back on them, and the
// kit refuses an optimizer the capabilities lack before compile_graph runs.
struct KitContext : sdk::FrameworkContext {};
class KitBackend final : public sdk::FrameworkBackend<KitContext> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "kit"; }
  std::unique_ptr<KitContext> open_context(int32_t, const sdk::HostSettings&,
                                           const sdk::Options&) override {
    return std::make_unique<KitContext>();
  }
  std::unique_ptr<sdk::Model> compile_graph(KitContext&, const dlhost_graph&,
                                            const dlhost_optimizer_desc&,
                                            const sdk::HostSettings& host,
                                            const sdk::Options&) override {
    compiled_seed = host.seed;
    return nullptr;
  }
  int64_t compiled_seed = -1;
};

TEST(FrameworkKit, FrameworkBackendHandsTheSettingsToOpenAndCompile) {
  ASSERT_NE(backend_plugin(), nullptr);  // the host attached
  KitBackend backend;
  const OptionMap at_open{{"seed", "9"}, {"threads", "2"}};
  std::unique_ptr<KitContext> context =
      backend.open(0, sdk::Options(reinterpret_cast<const dlhost_options*>(&at_open)));
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(context->host.seed, 9);
  EXPECT_EQ(context->host.threads, 2);
  TiedGraph g;
  backend.compile(*context, g.graph, sdk::sgd_optimizer(0.1f), sdk::Options(nullptr));
  EXPECT_EQ(backend.compiled_seed, 9);
  const OptionMap at_compile{{"seed", "11"}};
  backend.compile(*context, g.graph, sdk::sgd_optimizer(0.1f),
                  sdk::Options(reinterpret_cast<const dlhost_options*>(&at_compile)));
  EXPECT_EQ(backend.compiled_seed, 11);
  backend.compiled_seed = -1;
  EXPECT_NE(thrown_by([&] {
              backend.compile(*context, g.graph, sdk::adamw_optimizer(0.001f, 0.01f, 1e-8f),
                              sdk::Options(nullptr));
            }).find("optimizer kind 2 (adamw) not supported"),
            std::string::npos);
  EXPECT_EQ(backend.compiled_seed, -1);  // refused before the backend's compile
}

}  // namespace
