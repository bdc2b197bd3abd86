// test_device_path.cpp — the host's ABI 1.2 device layer (core/device.h, core/control_plane.h)
// against the async_device fixture, whose memory the host cannot touch and whose stream is a
// worker thread: events time the stream's work, copies cross only through the backend, and a
// gradient read before the backward work that writes it is caught (so the data-parallel tests,
// which use the same fixture, could fail if the host ever did it). Also the store control plane
// across two "ranks" (threads) of one process.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/control_plane.h"
#include "core/device.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"

namespace dlhost {
namespace {

const std::string kFixtures = std::string(DLHOST_TEST_BINARY_DIR) + "/tests/fixture_device";

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

}  // namespace
}  // namespace dlhost
