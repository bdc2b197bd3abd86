// null_backend.cpp — a measuring instrument for bench/, not a training backend: "bench_null"
// compiles any graph into one empty step per node (forward and backward) and one per parameter
// (update), and replays those lists exactly as cpu_onednn replays its primitives, but each step
// does nothing. A case run on it therefore times what the host and the step dispatch cost by
// themselves: the host's calls per mini-batch (forward, backward, update, synchronize, loss) and
// the per-op replay loop. Its loss is always 0, so it never learns; bench/ reports it only as
// host overhead. Parameters and inputs get real buffers so that write_param/read_param/set_input
// behave as the ABI asks.
// Thread-safety: as any backend, one caller at a time per model.
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/common.hpp"

namespace dlhost::bench_null {
namespace {

namespace sdk = dlhost::sdk;

struct Param {
  std::vector<float> value, grad;
};

struct Model {
  std::vector<std::function<void()>> forward_steps, backward_steps, update_steps;
  std::vector<Param> params;
  std::vector<std::vector<char>> inputs;  // indexed by tensor id, empty when not an input
  uint64_t ops_run = 0;                   // what the empty steps touch, so none is optimized away
  int32_t threads = 1;
  std::string implementation = "null (no computation)";
};

void run(const std::vector<std::function<void()>>& steps) {
  for (const auto& s : steps) s();
}

Model& model_of(dlhost_model* m) {
  if (m == nullptr) sdk::invalid("bench_null: null model");
  return *reinterpret_cast<Model*>(m);
}

Param& param_of(Model& m, int32_t id) {
  if (id < 0 || id >= static_cast<int32_t>(m.params.size()))
    sdk::invalid("bench_null: parameter " + std::to_string(id) + " out of range");
  return m.params[id];
}

int32_t device_count() { return 1; }

dlhost_status* device_info(int32_t index, const dlhost_device_info** out) {
  static const dlhost_device_info info = [] {
    auto d = sdk::make_struct<dlhost_device_info>(DLHOST_DEVICE_INFO_STRUCT_SIZE);
    d.kind = DLHOST_DEVICE_CPU;
    d.name = "null0";
    d.model = "no device (host-overhead probe)";
    d.cores = 1;
    d.isa = "none";
    d.library = "none";
    return d;
  }();
  return sdk::guard([&] {
    if (index != 0 || out == nullptr) sdk::invalid("bench_null: device_info: bad index or output");
    *out = &info;
  });
}

dlhost_status* context_create(int32_t index, const dlhost_options*, dlhost_context** out) {
  return sdk::guard([&] {
    if (index != 0 || out == nullptr) sdk::invalid("bench_null: context_create: bad arguments");
    static int token = 0;  // the context carries nothing
    *out = reinterpret_cast<dlhost_context*>(&token);
  });
}

void context_destroy(dlhost_context*) {}

dlhost_status* compile(dlhost_context*, const dlhost_graph* graph, const dlhost_optimizer_desc*,
                       const dlhost_options*, dlhost_model** out) {
  return sdk::guard([&] {
    if (graph == nullptr || graph->struct_size < DLHOST_GRAPH_STRUCT_SIZE || out == nullptr)
      sdk::invalid("bench_null: compile: missing graph or output");
    auto m = std::make_unique<Model>();
    uint64_t* counter = &m->ops_run;
    for (int32_t n = 0; n < graph->num_nodes; ++n) {
      m->forward_steps.emplace_back([counter] { ++*counter; });
      m->backward_steps.emplace_back([counter] { ++*counter; });
    }
    m->params.resize(graph->num_params);
    for (int32_t i = 0; i < graph->num_params; ++i) {
      const size_t count = static_cast<size_t>(graph->params[i]->count);
      m->params[i].value.assign(count, 0.0f);
      m->params[i].grad.assign(count, 0.0f);
      m->update_steps.emplace_back([counter] { ++*counter; });
    }
    m->inputs.resize(graph->num_tensors);
    for (int32_t i = 0; i < graph->num_inputs; ++i) {
      const int32_t id = graph->inputs[i];
      m->inputs[id].resize(static_cast<size_t>(sdk::element_count(sdk::tensor(graph, id))) * 4);
    }
    *out = reinterpret_cast<dlhost_model*>(m.release());
  });
}

void model_destroy(dlhost_model* m) { delete reinterpret_cast<Model*>(m); }

dlhost_status* model_info(dlhost_model* model, dlhost_model_info* out) {
  return sdk::guard([&] {
    Model& m = model_of(model);
    if (out == nullptr) sdk::invalid("bench_null: model_info: null output");
    if (DLHOST_HAS_FIELD(out, dlhost_model_info, threads)) out->threads = m.threads;
    if (DLHOST_HAS_FIELD(out, dlhost_model_info, implementation))
      out->implementation = m.implementation.c_str();
  });
}

dlhost_status* set_input(dlhost_model* model, int32_t tensor, const void* data, size_t bytes) {
  return sdk::guard([&] {
    Model& m = model_of(model);
    if (tensor < 0 || tensor >= static_cast<int32_t>(m.inputs.size()) ||
        m.inputs[tensor].size() != bytes || data == nullptr)
      sdk::invalid("bench_null: set_input: tensor " + std::to_string(tensor) +
                   " is not an input of " + std::to_string(bytes) + " bytes");
    std::memcpy(m.inputs[tensor].data(), data, bytes);
  });
}

dlhost_status* forward(dlhost_model* model) {
  return sdk::guard([&] { run(model_of(model).forward_steps); });
}

dlhost_status* backward(dlhost_model* model, const dlhost_grad_ready* ready) {
  return sdk::guard([&] {
    Model& m = model_of(model);
    run(m.backward_steps);
    if (ready != nullptr && ready->fn != nullptr)
      for (int32_t i = static_cast<int32_t>(m.params.size()) - 1; i >= 0; --i)
        ready->fn(ready->user, i);
  });
}

dlhost_status* update(dlhost_model* model) {
  return sdk::guard([&] { run(model_of(model).update_steps); });
}

dlhost_status* synchronize(dlhost_model* model) {
  return sdk::guard([&] { model_of(model); });
}

dlhost_status* read_loss(dlhost_model* model, float* loss) {
  return sdk::guard([&] {
    model_of(model);
    if (loss == nullptr) sdk::invalid("bench_null: read_loss: null output");
    *loss = 0.0f;
  });
}

dlhost_status* param_buffers(dlhost_model* model, int32_t id, dlhost_buffer* value,
                             dlhost_buffer* grad) {
  return sdk::guard([&] {
    Param& p = param_of(model_of(model), id);
    auto fill = [](dlhost_buffer* out, std::vector<float>& v) {
      if (out == nullptr) return;  // struct_size is the host's (dlhost_backend.h)
      out->data = v.data();
      out->bytes = v.size() * 4;
      out->dtype = DLHOST_DTYPE_F32;
      out->memory_space = DLHOST_MEMORY_HOST;
      out->device = -1;
    };
    fill(value, p.value);
    fill(grad, p.grad);
  });
}

std::vector<float>& part_of(Param& p, int32_t part, size_t bytes, const void* data) {
  if (part != DLHOST_PARAM_VALUE && part != DLHOST_PARAM_GRAD)
    sdk::invalid("bench_null: parameter part " + std::to_string(part) + " unknown");
  std::vector<float>& v = part == DLHOST_PARAM_VALUE ? p.value : p.grad;
  if (data == nullptr || bytes != v.size() * 4)
    sdk::invalid("bench_null: parameter of " + std::to_string(v.size() * 4) + " bytes, got " +
                 std::to_string(bytes));
  return v;
}

dlhost_status* read_param(dlhost_model* model, int32_t id, int32_t part, void* data, size_t bytes) {
  return sdk::guard([&] {
    auto& v = part_of(param_of(model_of(model), id), part, bytes, data);
    std::memcpy(data, v.data(), bytes);
  });
}

dlhost_status* write_param(dlhost_model* model, int32_t id, int32_t part, const void* data,
                           size_t bytes) {
  return sdk::guard([&] {
    auto& v = part_of(param_of(model_of(model), id), part, bytes, data);
    std::memcpy(v.data(), data, bytes);
  });
}

dlhost_status* memory_in_use(dlhost_model* model, uint64_t* bytes) {
  return sdk::guard([&] {
    Model& m = model_of(model);
    if (bytes == nullptr) sdk::invalid("bench_null: memory_in_use: null output");
    *bytes = 0;
    for (const Param& p : m.params) *bytes += (p.value.size() + p.grad.size()) * 4;
  });
}

const dlhost_backend_api kBackend = {
    DLHOST_BACKEND_API_STRUCT_SIZE,
    &device_count,
    &device_info,
    &context_create,
    &context_destroy,
    &compile,
    &model_destroy,
    &model_info,
    &set_input,
    &forward,
    &backward,
    &update,
    &synchronize,
    &read_loss,
    &param_buffers,
    &read_param,
    &write_param,
    &memory_in_use,
};

const dlhost_plugin kPlugin = {
    DLHOST_PLUGIN_STRUCT_SIZE,
    DLHOST_ABI_MAJOR,
    DLHOST_ABI_MINOR,
    DLHOST_PLUGIN_BACKEND,
    "bench_null",
    "0.1.0",
    "bench/ only: replays one empty step per op to time the host's own overhead (never trains)",
    nullptr,
    &kBackend,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace
}  // namespace dlhost::bench_null

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!dlhost::sdk::attach_host(host, "bench_null")) return nullptr;
  return &dlhost::bench_null::kPlugin;
}
