// test_device_path.cpp — the host's ABI 1.2 device layer (core/device.h,
// control_plane/control_plane.h) against the async_device fixture, whose memory the host cannot
// touch and whose stream is a worker thread: events time the stream's work, copies cross only
// through the backend, and a gradient read before the backward work that writes it is caught (so
// the data-parallel tests, which use the same fixture, could fail if the host ever did it). Also
// the store control plane across two "ranks" (threads) of one process. And what the skip rules read
// of these plugins before any rank starts (run/machine_facts.h): the fixture's fake GPUs, a CPU
// backend's none, gpu_cudnn without a driver, the memory the comms take.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control_plane/control_plane.h"
#include "core/device.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "run/machine_facts.h"

namespace dlhost {
namespace {

const std::string kFixtures = std::string(DLHOST_TEST_BINARY_DIR) + "/tests/fixture_device";
const std::string kPlugins = std::string(DLHOST_TEST_BINARY_DIR) + "/plugins";

// y = fc(x) (4 -> 3, bias), MSE against a target, batch 2: two parameters, weight then bias.
std::unique_ptr<Graph> small_graph() {
  GraphBuilder b("device_path", 2);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {4});
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {3});
  dlhost_fc_attrs fc{};
  fc.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
  fc.out_features = 3;
  fc.has_bias = 1;
  fc.batch_dims = 1;
  b.mse_loss("loss", b.fc("fc", x, fc), target);
  return b.finish();
}

// A compiled model of small_graph() on async_device, inputs and weights set.
class DevicePath : public ::testing::Test {
 protected:
  void SetUp() override {
    host_api();
    ASSERT_TRUE(registry_.load_file(kFixtures + "/libfixture_async_device.so"));
    plugin_ = registry_.find(DLHOST_PLUGIN_BACKEND, "async_device");
    ASSERT_NE(plugin_, nullptr);
    device_ = std::make_unique<BackendDevice>(*plugin_);
    ASSERT_TRUE(device_->has_events());
    ASSERT_NE(device_->memory(), nullptr);
    graph_ = small_graph();
    dlhost_options options;
    // Every device task 20 ms late: a host that races the stream is caught, not lucky.
    options.values["delay_us"] = "20000";
    context_ = create_context(*plugin_, 0, options);
    auto sgd = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
    sgd.kind = DLHOST_OPTIMIZER_SGD;
    sgd.learning_rate = 0.1f;
    model_ = compile_model(*plugin_, context_.get(), graph_->view(), sgd, options);
    std::vector<float> x{1, 2, 3, 4, -1, 0, 1, 2}, t{1, 0, -1, 0, 1, 0.5f};
    std::vector<float> w{0.1f, 0.2f, -0.1f, 0, 0.3f, -0.2f, 0.1f, 0.1f, 0, 0, 0.2f, -0.3f};
    check_status(api()->set_input(model(), 0, x.data(), x.size() * 4), "set_input");
    check_status(api()->set_input(model(), 1, t.data(), t.size() * 4), "set_input");
    check_status(api()->write_param(model(), 0, DLHOST_PARAM_VALUE, w.data(), w.size() * 4),
                 "write_param");
  }
  const dlhost_backend_api* api() const { return device_->api(); }
  dlhost_model* model() const { return model_.get(); }
  dlhost_buffer grad(int32_t param) const {
    dlhost_buffer value{}, g{};
    value.struct_size = g.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
    check_status(api()->param_buffers(model(), param, &value, &g), "param_buffers");
    return g;
  }

  PluginRegistry registry_;
  const LoadedPlugin* plugin_ = nullptr;
  std::unique_ptr<BackendDevice> device_;
  std::unique_ptr<Graph> graph_;
  ContextHandle context_{nullptr, ContextDeleter{nullptr}};
  ModelHandle model_{nullptr, ModelDeleter{nullptr}};
};

TEST_F(DevicePath, GradientsLiveInDeviceMemoryTheHostCannotRead) {
  dlhost_buffer g = grad(0);
  EXPECT_EQ(g.memory_space, DLHOST_MEMORY_DEVICE);
  EXPECT_EQ(g.dtype, DLHOST_DTYPE_F32);
  EXPECT_EQ(g.bytes, 12u * 4);
  // Dereferencing it would fault (the isolation test shows the crash); the stream is real.
  std::optional<dlhost_stream> s = device_->stream(model());
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, DLHOST_STREAM_HOST_QUEUE);
  EXPECT_NE(s->handle, nullptr);
}

TEST_F(DevicePath, EventsBracketTheStreamsWork) {
  DeviceEvent start(*device_, model()), end(*device_, model());
  start.record();
  check_status(api()->forward(model()), "forward");
  end.record();
  end.synchronize();
  EXPECT_GT(end.ms_since(start), 0.0);  // a real, positive device time
  // An event never recorded has no time: refused, not made up.
  DeviceEvent never(*device_, model());
  EXPECT_THROW(never.ms_since(start), Error);
}

TEST_F(DevicePath, OrderedArenaCopyOfAGradientMatchesTheBackendsOwnRead) {
  DeviceBuffer arena(*device_, context_.get(), 15 * 4, DLHOST_DTYPE_F32);
  check_status(api()->forward(model()), "forward");
  check_status(api()->backward(model(), nullptr), "backward");
  // Enqueued after backward: ordered after the work that writes both gradients.
  device_->copy_device(model(), grad(0), 0, arena.get(), 0, 12 * 4);
  device_->copy_device(model(), grad(1), 0, arena.get(), 12 * 4, 3 * 4);
  std::vector<float> packed(15), w(12), b(3);
  device_->copy_to_host(context_.get(), model(), arena.get(), 0, packed.data(), 15 * 4);
  check_status(api()->read_param(model(), 0, DLHOST_PARAM_GRAD, w.data(), 48), "read_param");
  check_status(api()->read_param(model(), 1, DLHOST_PARAM_GRAD, b.data(), 12), "read_param");
  EXPECT_EQ(std::memcmp(packed.data(), w.data(), 48), 0);
  EXPECT_EQ(std::memcmp(packed.data() + 12, b.data(), 12), 0);
  EXPECT_NE(w[0], 0.0f);
}

TEST_F(DevicePath, AGradientReadBeforeBackwardIsCaught) {
  DeviceBuffer arena(*device_, context_.get(), 12 * 4, DLHOST_DTYPE_F32);
  check_status(api()->forward(model()), "forward");
  // On the stream, but before the backward work: the fixture fails the step.
  device_->copy_device(model(), grad(0), 0, arena.get(), 0, 12 * 4);
  check_status(api()->backward(model(), nullptr), "backward");
  try {
    check_status(api()->synchronize(model()), "synchronize");
    FAIL() << "an early read passed unnoticed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("early read"), std::string::npos) << e.what();
  }
}

struct UnorderedRead {
  const BackendDevice* device;
  dlhost_context* context;
  dlhost_buffer grad;
  std::string error;
};

TEST_F(DevicePath, AnUnorderedReadInGradReadyIsCaught) {
  // grad_ready comes when a gradient's work is enqueued, not done: a host copying it then
  // without ordering (model NULL) races the device.
  UnorderedRead probe{device_.get(), context_.get(), grad(0), ""};
  dlhost_grad_ready ready{};
  ready.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  ready.user = &probe;
  ready.fn = [](void* user, int32_t) {
    auto* p = static_cast<UnorderedRead*>(user);
    std::vector<float> out(12);
    try {
      p->device->copy_to_host(p->context, nullptr, p->grad, 0, out.data(), 48);
    } catch (const Error& e) {
      p->error = e.what();
    }
  };
  check_status(api()->forward(model()), "forward");
  check_status(api()->backward(model(), &ready), "backward");
  check_status(api()->synchronize(model()), "synchronize");
  EXPECT_NE(probe.error.find("early read"), std::string::npos) << "error: " << probe.error;
}

TEST(StoreControlPlane, TwoRanksInOneProcessAgree) {
  reset_store();
  std::vector<double> sums[2];
  std::vector<int64_t> gathered[2];
  auto rank = [&](int r) {
    auto plane = store_control_plane(r, 2, "test/plane/");
    std::vector<double> v{1.0 + r, 10.0 * r};
    plane->all_reduce(v.data(), v.size(), DLHOST_DTYPE_F64, DLHOST_REDUCE_SUM);
    sums[r] = v;
    int64_t mine = 7 + r;
    gathered[r].assign(2, 0);
    plane->all_gather(&mine, gathered[r].data(), 1, DLHOST_DTYPE_I64);
    plane->barrier();
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sums[r], (std::vector<double>{3.0, 10.0}));
    EXPECT_EQ(gathered[r], (std::vector<int64_t>{7, 8}));
  }
  reset_store();
}

// The fixture's devices are GPUs (kind GPU, device memory) as many as DLHOST_FAKE_DEVICES says:
// the 2- and 4-rank device paths of device_e2e.sh run on the same GPU rule as gpu_cudnn.
TEST(MachineFacts, TheFixtureReportsItsFakeGpus) {
  host_api();
  PluginRegistry registry;
  ASSERT_TRUE(registry.load_file(kFixtures + "/libfixture_async_device.so"));
  ASSERT_TRUE(registry.load_file(kFixtures + "/libfixture_device_comm.so"));
  const MachineFacts facts = machine_facts(registry, 2);
  unsetenv("DLHOST_FAKE_DEVICES");
  std::optional<BackendDevices> d = facts.backend("async_device");
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->gpu);
  EXPECT_TRUE(d->device_memory);
  EXPECT_EQ(d->gpus, 2);
  EXPECT_EQ(d->why_none, "");
  setenv("DLHOST_FAKE_DEVICES", "4", 1);
  EXPECT_EQ(facts.backend("async_device")->gpus, 4);
  unsetenv("DLHOST_FAKE_DEVICES");
  EXPECT_FALSE(facts.backend("no_such_backend").has_value());
  std::optional<CommMemory> comm = facts.comm("device_store");
  ASSERT_TRUE(comm.has_value());
  EXPECT_TRUE(comm->device_memory);
}

// What the skip rules read of the build's own plugins (libdlhost_NAME.so), which the build may
// leave out where a library is missing.
class BuiltPlugin : public ::testing::Test {
 protected:
  // False when the build left the plugin out (the test then skips, saying so).
  bool load(const std::string& name) {
    const std::string file = kPlugins + "/libdlhost_" + name + ".so";
    if (!std::filesystem::exists(file)) return false;
    host_api();
    EXPECT_TRUE(registry_.load_file(file)) << file;
    return true;
  }
  PluginRegistry registry_;
};

TEST_F(BuiltPlugin, ACpuBackendHasNoGpu) {
  if (!load("cpu_onednn")) GTEST_SKIP() << "cpu_onednn is not built here";
  std::optional<BackendDevices> d = machine_facts(registry_, 2).backend("cpu_onednn");
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->gpu);
  EXPECT_FALSE(d->device_memory);
  EXPECT_EQ(d->gpus, 0);
  EXPECT_EQ(d->why_none, "none of its 1 devices is a GPU");
}

// gpu_cudnn without a driver: a GPU backend with 0 GPUs, and its query's reason.
TEST_F(BuiltPlugin, AGpuBackendWithoutADriverHasZeroGpusAndSaysWhy) {
  if (!load("gpu_cudnn")) GTEST_SKIP() << "gpu_cudnn is not built here (no CUDA toolkit)";
  const LoadedPlugin* p = registry_.find(DLHOST_PLUGIN_BACKEND, "gpu_cudnn");
  ASSERT_NE(p, nullptr);
  if (p->usable) GTEST_SKIP() << "a GPU is usable here: the no-driver path cannot be shown";
  const BackendDevices d = backend_devices(*p);
  EXPECT_TRUE(d.gpu);
  EXPECT_TRUE(d.device_memory);
  EXPECT_EQ(d.gpus, 0);
  EXPECT_EQ(d.why_none, p->unusable_reason);
  EXPECT_FALSE(d.why_none.empty());
}

// Debian's Open MPI is built without CUDA: the mpi plugin says so before MPI starts, so a
// `comm_memory: device` case is skipped before its ranks start.
TEST_F(BuiltPlugin, AnMpiWithoutCudaTakesHostMemoryBeforeInit) {
  if (!load("comm_mpi")) GTEST_SKIP() << "comm_mpi is not built here (no MPI)";
  std::optional<CommMemory> m = machine_facts(registry_, 2).comm("mpi");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->library.rfind("Open MPI v", 0), 0u) << m->library;
  if (m->device_memory) GTEST_SKIP() << "this Open MPI is built with CUDA: " << m->library;
  EXPECT_FALSE(m->device_memory);
}

}  // namespace
}  // namespace dlhost
