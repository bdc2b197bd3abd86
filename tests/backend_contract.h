// backend_contract.h — what the tests of a framework backend's ABI contract share: a small
// classifier graph and a Trainer that compiles a graph on a backend plugin with seeded weights
// and inputs, and reads and writes its parameters through the C table (test_cpu_tensorflow.cpp;
// test_cpu_libtorch.cpp holds an older copy of the same helpers).
// Thread-safety: none; a test uses its Trainer from one thread.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "graph_attrs.h"

namespace dlhost::contract {

// data [4] -> fc1 (5) -> relu -> head (3) -> cross-entropy, at batch 2.
inline std::unique_ptr<Graph> mlp() {
  GraphBuilder b("mlp", 2);
  int32_t data = b.input("data", DLHOST_DTYPE_F32, {4});
  int32_t x = b.activation("act", b.fc("fc1", data, test_attrs::fc(5)),
                           test_attrs::act(DLHOST_ACTIVATION_RELU));
  int32_t logits = b.fc("head", x, test_attrs::fc(3));
  b.softmax_cross_entropy("loss", logits, b.input("labels", DLHOST_DTYPE_I32, {}));
  return b.finish();
}

inline std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A compiled model of `graph` with seeded weights and inputs.
struct Trainer {
  std::unique_ptr<Graph> graph;
  const LoadedPlugin& plugin;
  const dlhost_backend_api& api;
  ContextHandle context;
  ModelHandle model;

  Trainer(const LoadedPlugin& backend, std::unique_ptr<Graph> g,
          const dlhost_optimizer_desc& opt = test_attrs::sgd(0.1f), dlhost_options options = {})
      : graph(std::move(g)), plugin(backend), api(*backend.table->backend) {
    if (!options.values.count("threads")) options.values["threads"] = "1";
    options.values["seed"] = "42";
    context = create_context(plugin, 0, options);
    model = compile_model(plugin, context.get(), graph->view(), opt, options);
    std::mt19937 rng(7);
    for (int32_t p = 0; p < graph->num_params(); ++p) put(p, DLHOST_PARAM_VALUE, random(p, rng));
    for (int32_t k = 0; k < graph->view()->num_inputs; ++k) feed(graph->view()->inputs[k], rng);
  }
  // Uniform floats, or ids 0, 1, 2, ... (labels of 3 classes).
  void feed(int32_t id, std::mt19937& rng) {
    const dlhost_tensor_desc& d = graph->tensor(id);
    size_t n = 1;
    for (int32_t k = 0; k < d.rank; ++k) n *= size_t(d.dims[k]);
    std::vector<float> floats = random_floats(n, rng);
    std::vector<int32_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = int32_t(i % 3);
    const void* data = d.dtype == DLHOST_DTYPE_I32 ? static_cast<const void*>(ids.data())
                                                   : static_cast<const void*>(floats.data());
    check_status(api.set_input(model.get(), id, data, n * 4), "set_input");
  }
  int32_t input(int k) const { return graph->view()->inputs[k]; }
  std::vector<float> random(int32_t p, std::mt19937& rng) const {
    return random_floats(size_t(graph->param(p).count), rng);
  }
  std::vector<float> get(int32_t p, int32_t part) {
    std::vector<float> v(size_t(graph->param(p).count));
    check_status(api.read_param(model.get(), p, part, v.data(), v.size() * 4), "read_param");
    return v;
  }
  void put(int32_t p, int32_t part, const std::vector<float>& v) {
    check_status(api.write_param(model.get(), p, part, v.data(), v.size() * 4), "write_param");
  }
  float forward_backward(const dlhost_grad_ready* ready = nullptr) {
    check_status(api.forward(model.get()), "forward");
    check_status(api.backward(model.get(), ready), "backward");
    float loss = 0;
    check_status(api.read_loss(model.get(), &loss), "read_loss");
    return loss;
  }
  void update() { check_status(api.update(model.get()), "update"); }
  dlhost_buffer buffer(int32_t p, bool grad) {
    dlhost_buffer value{}, gradient{};
    value.struct_size = gradient.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
    check_status(api.param_buffers(model.get(), p, &value, &gradient), "param_buffers");
    return grad ? gradient : value;
  }
};

inline int32_t code_of(dlhost_status* s, std::string* message) {
  if (s == nullptr) return DLHOST_CODE_OK;
  const int32_t code = host_api()->status_code(s);
  *message = host_api()->status_message(s);
  host_api()->status_destroy(s);
  return code;
}

// Backward twice gives the same gradient (overwrites, never accumulates); grad-ready notices come
// once per parameter in reverse layer order (mlp's: head.weight, head.bias, fc1.weight, fc1.bias).
inline void backward_overwrites_and_notifies_in_reverse_layer_order(const LoadedPlugin& backend) {
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

// The ABI's SGD on `make()`'s graph over two steps with gradients the test writes:
// v = momentum * v + (clip_scale * g + decay * w); w -= lr * v, with and without clipping.
template <class MakeGraph>
void sgd_is_the_abis(const LoadedPlugin& backend, MakeGraph make) {
  for (float clip : {0.0f, 0.5f}) {
    SCOPED_TRACE(clip);
    const dlhost_optimizer_desc opt = test_attrs::sgd(0.1f, 0.9f, 0.01f, clip);
    Trainer t(backend, make(), opt);
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

}  // namespace dlhost::contract
