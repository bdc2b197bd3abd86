// test_plugin_kit.cpp — the SDK's plugin kits (backend_kit.hpp, comm_kit.hpp, cpu_info.hpp) on
// their own, through the C tables they fill, with a minimal host table made here: so the test
// needs nothing of host/ and checks exactly what a third-party plugin gets. What it pins: every
// exception becomes a status with the right code (sdk::Error keeps its code, std::bad_alloc is
// RESOURCE_EXHAUSTED, anything else INTERNAL), NULL handles and out-parameters are
// INVALID_ARGUMENT naming the call, device indices are checked, model_info fills only what the
// caller's struct_size covers, versions come from PluginInfo and library(), and the CPU is
// described from one parse.
#include <gtest/gtest.h>

#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "dlhost/backend_kit.hpp"
#include "dlhost/comm_kit.hpp"

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
const char* option_get(const dlhost_options*, const char*) { return nullptr; }

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
  std::unique_ptr<sdk::Comm> init(const dlhost_comm_init_args&) override {
    return std::make_unique<FakeComm>();
  }
};

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

TEST(Graph, OpNamesFollowTheEnum) {
  EXPECT_EQ(sdk::op_name(DLHOST_OP_INPUT), "input");
  EXPECT_EQ(sdk::op_name(DLHOST_OP_CONV2D), "conv2d");
  EXPECT_EQ(sdk::op_name(DLHOST_OP_SOFTMAX_CROSS_ENTROPY), "softmax_cross_entropy");
  EXPECT_EQ(sdk::op_name(DLHOST_OP_GLOBAL_AVG_POOL), "global_avg_pool");  // the last of 1.1
  EXPECT_EQ(sdk::op_name(DLHOST_OP_LAYER_NORM), "layer_norm");  // the first of 1.4
  EXPECT_EQ(sdk::op_name(DLHOST_OP_TIED_FC), "tied_fc");        // the last of 1.4
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
