// framework_contract.h — the ABI contract every framework backend (a library with its own tensors,
// autograd and optimizer underneath: cpu_tensorflow, cpu_mxnet, cpu_libtorch and cpu_libtorch2)
// must keep, as checks a backend's GoogleTest calls with the plugin's name: the device line names
// the libraries; the threads option reaches the model, and one out of range is refused naming it;
// gradient buffers stay put and update uses what the host left in them, and the host's broadcast
// into a value buffer is what the next step trains; backward overwrites (frameworks accumulate) and
// notifies once per parameter in reverse layer order; the ABI's SGD (momentum, weight decay,
// clipping by the global norm) exactly; ids and sizes checked at set_input; a precision other than
// fp32 UNIMPLEMENTED. Also the Trainer those checks and a backend's own tests drive a model with.
// `dlhost conform` checks the numbers; these check what it cannot see.
// Thread-safety: none; a test executable runs them from its main thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "build_plugin.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "graph_attrs.h"

namespace dlhost::framework_contract {

using namespace dlhost::test_attrs;

inline const LoadedPlugin& plugin(const std::string& name) {
  return test_plugins::build_plugin(DLHOST_PLUGIN_BACKEND, name);
}
inline const dlhost_backend_api& api(const std::string& name) {
  return *plugin(name).table->backend;
}

// data [4] -> fc1 (5) -> relu -> head (3) -> cross-entropy, at batch 2.
inline std::unique_ptr<Graph> mlp() {
  GraphBuilder b("mlp", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
  int32_t x = b.activation("act", b.fc("fc1", data, fc(5)), act(DLHOST_ACTIVATION_RELU));
  int32_t logits = b.fc("head", x, fc(3));
  b.softmax_cross_entropy("loss", logits, b.input("labels", DLHOST_DTYPE_I32, {}));
  return b.finish();
}

// Options of `threads` threads (a string, as the host sets it) and the backend's own `extra`.
inline dlhost_options threads_options(int threads, dlhost_options extra = {}) {
  extra.values["threads"] = std::to_string(threads);
  return extra;
}

// A compiled model of `graph` on `backend` with seeded weights and inputs; `options` are the
// backend's own plus the host-set ones (threads 1 unless given, seed 42).
struct Trainer {
  std::string backend;
  std::unique_ptr<Graph> graph;
  ContextHandle context;
  ModelHandle model;

  Trainer(const std::string& name, std::unique_ptr<Graph> g,
          const dlhost_optimizer_desc& opt = sgd(0.1f), dlhost_options options = {})
      : backend(name), graph(std::move(g)) {
    if (!options.values.count("threads")) options.values["threads"] = "1";
    options.values["seed"] = "42";
    context = create_context(plugin(name), 0, options);
    model = compile_model(plugin(name), context.get(), graph->view(), opt, options);
    std::mt19937 rng(7);
    for (int32_t p = 0; p < graph->num_params(); ++p) put(p, DLHOST_PARAM_VALUE, random(p, rng));
    for (int32_t k = 0; k < graph->view()->num_inputs; ++k) feed(graph->view()->inputs[k], rng);
  }
  const dlhost_backend_api& table() const { return api(backend); }
  // Uniform floats, or ids (i * 7 + tensor) % 3: labels of 3 classes, tokens of 3 words, the
  // tensors of one graph fed different ids.
  void feed(int32_t id, std::mt19937& rng) {
    const dlhost_tensor_desc& d = graph->tensor(id);
    size_t n = 1;
    for (int32_t k = 0; k < d.rank; ++k) n *= size_t(d.dims[k]);
    std::vector<float> floats = random_floats(n, rng);
    std::vector<int32_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = int32_t((i * 7 + size_t(id)) % 3);
    const void* data = d.dtype == DLHOST_DTYPE_I32 ? static_cast<const void*>(ids.data())
                                                   : static_cast<const void*>(floats.data());
    check_status(table().set_input(model.get(), id, data, n * 4), "set_input");
  }
  int32_t input(int k) const { return graph->view()->inputs[k]; }
  std::vector<float> random(int32_t p, std::mt19937& rng) const {
    return random_floats(size_t(graph->param(p).count), rng);
  }
  static std::vector<float> random_floats(size_t n, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
  }
  std::vector<float> get(int32_t p, int32_t part) {
    std::vector<float> v(size_t(graph->param(p).count));
    check_status(table().read_param(model.get(), p, part, v.data(), v.size() * 4), "read_param");
    return v;
  }
  void put(int32_t p, int32_t part, const std::vector<float>& v) {
    check_status(table().write_param(model.get(), p, part, v.data(), v.size() * 4), "write_param");
  }
  void forward_backward(const dlhost_grad_ready* ready = nullptr) {
    check_status(table().forward(model.get()), "forward");
    check_status(table().backward(model.get(), ready), "backward");
  }
  void update() { check_status(table().update(model.get()), "update"); }
  float loss() {
    float l = 0;
    check_status(table().read_loss(model.get(), &l), "read_loss");
    return l;
  }
  dlhost_buffer buffer(int32_t p, bool grad) {
    dlhost_buffer value{}, gradient{};
    value.struct_size = gradient.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
    check_status(table().param_buffers(model.get(), p, &value, &gradient), "param_buffers");
    return grad ? gradient : value;
  }
  dlhost_model_info info() {
    dlhost_model_info info{};
    info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
    check_status(table().model_info(model.get(), &info), "model_info");
    return info;
  }
  int32_t threads() { return info().threads; }
};

// The status's code (OK for NULL), its message into `message`; the status is destroyed.
inline int32_t code_of(dlhost_status* s, std::string* message) {
  if (s == nullptr) return DLHOST_CODE_OK;
  const int32_t code = host_api()->status_code(s);
  *message = host_api()->status_message(s);
  host_api()->status_destroy(s);
  return code;
}

// The device line names each of `parts` (the framework, its oneDNN, its BLAS, ...) and an ISA.
inline void describes_the_device_and_its_libraries(const std::string& backend,
                                                   const std::vector<std::string>& parts) {
  const dlhost_device_info* info = nullptr;
  check_status(api(backend).device_info(0, &info), "device_info");
  const std::string library = info->library;
  for (const std::string& part : parts) EXPECT_NE(library.find(part), std::string::npos) << library;
  EXPECT_GT(std::string(info->isa).size(), 0u);
}

// A model of 1 and of 2 threads says so in model_info, with its parameters' bytes, and (when not
// empty) an implementation naming `implementation`.
inline void threads_option_sets_the_models_threads(const std::string& backend,
                                                   const std::string& implementation = "") {
  for (int threads : {1, 2}) {
    Trainer t(backend, mlp(), sgd(0.1f), threads_options(threads));
    const dlhost_model_info info = t.info();
    EXPECT_EQ(info.threads, threads);
    EXPECT_GT(info.param_bytes, 0u);
    EXPECT_NE(std::string(info.implementation).find(implementation), std::string::npos)
        << info.implementation;
  }
}

// A threads option out of range is refused when the context opens, naming the plugin, the key,
// the value and the range (sdk::Options::get_int_in).
inline void threads_out_of_range_is_refused_naming_the_key(const std::string& backend) {
  try {
    create_context(plugin(backend), 0, threads_options(5000));
    ADD_FAILURE() << backend << " opened a context for 5000 threads";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(backend + ": option threads=5000 out of range [0, 4096]"),
              std::string::npos)
        << e.what();
  }
}

// The host broadcasts rank 0's weights into the value buffers before the first step and
// all-reduces gradients in place between backward and update; update must step with what it finds
// there, and neither buffer may move. Parameter `p` of mlp() must keep the canonical layout in the
// backend's buffers (a bias does everywhere). `value_buffer_is_live`: the value buffer is the
// variable itself, current after update; otherwise it only stages what the next run takes in.
inline void update_uses_the_gradient_buffers_in_place(const std::string& backend, int32_t p,
                                                      bool value_buffer_is_live) {
  Trainer t(backend, mlp(), sgd(1.0f));
  const dlhost_buffer value = t.buffer(p, false), grad = t.buffer(p, true);
  std::vector<float> w = t.get(p, DLHOST_PARAM_VALUE);
  ASSERT_EQ(value.bytes, w.size() * 4);
  auto* v_mem = static_cast<float*>(value.data);
  EXPECT_EQ(std::vector<float>(v_mem, v_mem + w.size()), w);  // the variable's value
  for (float& x : w) x *= 0.5f;
  std::copy(w.begin(), w.end(), v_mem);  // what a broadcast from rank 0 does
  t.forward_backward();
  EXPECT_EQ(t.get(p, DLHOST_PARAM_VALUE), w);
  const std::vector<float> g = t.get(p, DLHOST_PARAM_GRAD);
  auto* g_mem = static_cast<float*>(grad.data);
  ASSERT_EQ(grad.bytes, g.size() * 4);
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g_mem[i], g[i]) << i;
    g_mem[i] *= 0.5f;  // what averaging over two ranks with a zero partner does
  }
  t.update();
  const std::vector<float> after = t.get(p, DLHOST_PARAM_VALUE);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_FLOAT_EQ(after[i], w[i] - 0.5f * g[i]) << i;
  EXPECT_EQ(t.buffer(p, false).data, value.data);
  EXPECT_EQ(t.buffer(p, true).data, grad.data);
  if (value_buffer_is_live) {
    EXPECT_EQ(static_cast<float*>(value.data)[0], after[0]);
  }
}

inline void backward_overwrites_and_notifies_in_reverse_layer_order(const std::string& backend) {
  Trainer t(backend, mlp());
  std::vector<int32_t> seen;
  dlhost_grad_ready ready{};
  ready.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  ready.user = &seen;
  ready.fn = [](void* user, int32_t param) {
    static_cast<std::vector<int32_t>*>(user)->push_back(param);
  };
  t.forward_backward(&ready);
  const std::vector<float> first = t.get(0, DLHOST_PARAM_GRAD);
  t.forward_backward();
  EXPECT_EQ(t.get(0, DLHOST_PARAM_GRAD), first);  // not twice the gradient
  // Parameters in graph order: fc1.weight 0, fc1.bias 1, head.weight 2, head.bias 3.
  EXPECT_EQ(seen, (std::vector<int32_t>{2, 3, 0, 1}));
}

// The ABI's SGD on `make_graph()`'s graph over two steps with gradients the test writes:
// v = momentum * v + (clip_scale * g + decay * w); w -= lr * v, with and without clipping.
inline void sgd_is_the_abis_with_momentum_decay_and_clipping(
    const std::string& backend, const std::function<std::unique_ptr<Graph>()>& make_graph = mlp) {
  for (float clip : {0.0f, 0.5f}) {
    SCOPED_TRACE(clip);
    const dlhost_optimizer_desc opt = sgd(0.1f, 0.9f, 0.01f, clip);
    Trainer t(backend, make_graph(), opt);
    const int32_t n = t.graph->num_params();
    std::mt19937 rng(3);
    std::vector<std::vector<float>> w(n), v(n);
    for (int32_t p = 0; p < n; ++p) {
      w[p] = t.get(p, DLHOST_PARAM_VALUE);
      v[p].assign(w[p].size(), 0.0f);
    }
    for (int step = 0; step < 2; ++step) {
      std::vector<std::vector<float>> g(n);
      double sq = 0;
      for (int32_t p = 0; p < n; ++p) {
        g[p] = t.random(p, rng);
        for (float e : g[p]) sq += double(e) * e;
        t.put(p, DLHOST_PARAM_GRAD, g[p]);
      }
      const double scale = clip > 0 ? std::min(1.0, clip / std::sqrt(sq)) : 1.0;
      if (clip > 0) {
        ASSERT_LT(scale, 0.5);  // the clipping really acts
      }
      t.update();
      for (int32_t p = 0; p < n; ++p) {
        const std::vector<float> got = t.get(p, DLHOST_PARAM_VALUE);
        for (size_t i = 0; i < got.size(); ++i) {
          v[p][i] = opt.momentum * v[p][i] + float(scale * g[p][i]) + opt.weight_decay * w[p][i];
          w[p][i] -= opt.learning_rate * v[p][i];
          ASSERT_NEAR(got[i], w[p][i], 1e-6f)
              << "step " << step << " param " << p << "[" << i << "]";
        }
      }
    }
  }
}

inline void set_input_rejects_labels_out_of_range_and_wrong_sizes(const std::string& backend) {
  Trainer t(backend, mlp());
  std::string message;
  const int32_t bad[] = {0, 3};  // 3 classes
  EXPECT_EQ(code_of(api(backend).set_input(t.model.get(), t.input(1), bad, sizeof bad), &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'labels'"), std::string::npos) << message;
  EXPECT_NE(message.find("id 3 at position 1"), std::string::npos) << message;
  const float data[3] = {};
  EXPECT_EQ(code_of(api(backend).set_input(t.model.get(), t.input(0), data, sizeof data), &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("takes 32 bytes, got 12"), std::string::npos) << message;
}

// Only fp32 is implemented: another precision is UNIMPLEMENTED at compile (the host then records
// the case SKIPPED), never silently run in fp32. A backend that publishes capabilities is refused
// the mode at context_create already; a host without that check meets the compile refusal.
inline void other_precisions_are_unimplemented(const std::string& backend) {
  std::unique_ptr<Graph> graph = mlp();
  dlhost_options options;
  options.values["precision"] = "bf16";
  EXPECT_THROW(create_context(plugin(backend), 0, options), std::exception);
  ContextHandle context = create_context(plugin(backend), 0, dlhost_options{});
  dlhost_model* model = nullptr;
  std::string message;
  const dlhost_optimizer_desc opt = sgd(0.1f);
  EXPECT_EQ(
      code_of(api(backend).compile(context.get(), graph->view(), &opt, &options, &model), &message),
      DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(message.find("precision bf16"), std::string::npos) << message;
}

}  // namespace dlhost::framework_contract
