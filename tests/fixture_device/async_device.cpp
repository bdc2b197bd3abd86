// async_device.cpp — a test fixture: the backend "async_device", which behaves like a GPU
// backend without a GPU, so that every ABI 1.2 device path of the host is exercised and checked
// on a CPU-only machine (fake_device.h has the device it runs on).
//
// - Asynchronous: forward, backward, update and set_input enqueue work on the model's stream (a
//   worker thread) and return; synchronize waits. Option "delay_us" makes every task sleep first,
//   so a host that reads results before their event sees stale data or a fault, not luck.
// - Device memory: parameters, gradients, activations live in the fake device's window; the host
//   touching one faults (SIGSEGV). backward calls grad_ready as soon as a gradient's work is
//   ENQUEUED (the ABI's rule for device backends), not when it is done.
// - Early reads are caught: a gradient is "produced" when its backward task has run and stops
//   being so when the next step's forward runs; a copy on the stream (copy_to_host, copy_device)
//   that reads a gradient outside that window, or an unordered copy (model NULL) while a stream
//   of the context still has work, fails with FAILED_PRECONDITION naming the read.
// - Option "misreport_memory_space": param_buffers says HOST for device buffers, so a host that
//   believes it reads protected memory and dies (the misuse test).
// - devices: DLHOST_FAKE_DEVICES (default 2) fake devices, one arena per context.
// - Events carry real timestamps taken on the stream when the work before them has run.
// - Real training, plain loops: fully connected, relu/sigmoid/tanh, softmax cross-entropy (one
//   label per row), MSE; SGD with momentum, weight decay and clipping as dlhost_backend.h says.
//   Anything else is UNIMPLEMENTED. FP32 only.
//
// An error inside device work is sticky, as CUDA's are: the next synchronize reports it.
#include <dlhost/dlhost.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fake_device.h"

namespace {

namespace sdk = dlhost::sdk;
using fake_device::alias;
using Clock = std::chrono::steady_clock;

struct Model;

struct Context {
  fake_device::Arena arena;
  int32_t device = 0;
  int64_t delay_us = 0;
  bool misreport_memory_space = false;
  std::mutex models_mu;
  std::vector<Model*> models;  // compiled in this context, for the unordered-read check
};

struct Node {
  int32_t op = 0;
  std::vector<int32_t> inputs, params;
  int32_t output = 0;
  int64_t rows = 0, in = 0, out = 0;  // FC: rows x in -> rows x out; losses: rows x out logits
  int32_t activation = 0;
};

struct Tensor {
  float* value = nullptr;  // device addresses
  float* grad = nullptr;
  int64_t count = 0;
  int32_t dtype = DLHOST_DTYPE_F32;
};

struct Param {
  float* value = nullptr;  // device addresses
  float* grad = nullptr;
  float* momentum = nullptr;
  int64_t count = 0;
  bool produced = false;  // stream thread only: backward wrote the gradient of this step
};

struct Model {
  Context* ctx = nullptr;
  fake_device::Stream stream;
  std::vector<Node> nodes;
  std::vector<Tensor> tensors;
  std::vector<Param> params;
  int32_t loss = -1;
  dlhost_optimizer_desc opt{};
  uint64_t bytes = 0;
  std::mutex error_mu;
  std::string error;  // first failure of device work; sticky

  ~Model() {
    stream.synchronize();
    {
      std::lock_guard<std::mutex> lock(ctx->models_mu);
      ctx->models.erase(std::find(ctx->models.begin(), ctx->models.end(), this));
    }
    for (auto& t : tensors) {
      free_device(t.value, t.count);
      free_device(t.grad, t.count);
    }
    for (auto& p : params) {
      free_device(p.value, p.count);
      free_device(p.grad, p.count);
      free_device(p.momentum, p.count);
    }
  }
  float* device_floats(int64_t count) {
    bytes += static_cast<uint64_t>(count) * 4;
    return static_cast<float*>(ctx->arena.allocate(static_cast<uint64_t>(count) * 4));
  }
  void free_device(float* p, int64_t count) {
    if (p != nullptr) ctx->arena.release(static_cast<uint64_t>(count) * 4);
  }
  // Device work: runs on the stream after everything enqueued before it.
  void launch(std::function<void()> kernel) {
    int64_t delay = ctx->delay_us;
    stream.enqueue([this, delay, kernel = std::move(kernel)] {
      if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
      try {
        kernel();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (error.empty()) error = e.what();
      }
    });
  }
  void synchronize() {
    stream.synchronize();
    std::lock_guard<std::mutex> lock(error_mu);
    if (!error.empty())
      sdk::fail(DLHOST_CODE_INTERNAL, "async_device: device work failed: " + error);
  }
};

Model& model_of(dlhost_model* m) { return *reinterpret_cast<Model*>(m); }
Context& context_of(dlhost_context* c) { return *reinterpret_cast<Context*>(c); }

// --- kernels: run on the stream, on alias pointers ----------------------------------------------

float activate(int32_t kind, float x) {
  if (kind == DLHOST_ACTIVATION_RELU) return x > 0 ? x : 0;
  if (kind == DLHOST_ACTIVATION_SIGMOID) return 1 / (1 + std::exp(-x));
  return std::tanh(x);
}
float activation_grad(int32_t kind, float y) {  // from the output y
  if (kind == DLHOST_ACTIVATION_RELU) return y > 0 ? 1.f : 0.f;
  if (kind == DLHOST_ACTIVATION_SIGMOID) return y * (1 - y);
  return 1 - y * y;
}

void forward_node(Model& m, const Node& n) {
  Tensor& y = m.tensors[n.output];
  float* out = alias<float>(y.value);
  if (n.op == DLHOST_OP_FC) {
    const float* x = alias<float>(m.tensors[n.inputs[0]].value);
    const float* w = alias<float>(m.params[n.params[0]].value);
    const float* b = n.params.size() > 1 ? alias<float>(m.params[n.params[1]].value) : nullptr;
    for (int64_t r = 0; r < n.rows; ++r)
      for (int64_t o = 0; o < n.out; ++o) {
        float s = b != nullptr ? b[o] : 0.f;
        for (int64_t i = 0; i < n.in; ++i) s += x[r * n.in + i] * w[o * n.in + i];
        out[r * n.out + o] = s;
      }
  } else if (n.op == DLHOST_OP_ACTIVATION) {
    const float* x = alias<float>(m.tensors[n.inputs[0]].value);
    for (int64_t i = 0; i < y.count; ++i) out[i] = activate(n.activation, x[i]);
  } else if (n.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY) {
    const float* logits = alias<float>(m.tensors[n.inputs[0]].value);
    const int32_t* labels = alias<int32_t>(m.tensors[n.inputs[1]].value);
    double loss = 0;
    for (int64_t r = 0; r < n.rows; ++r) {
      const float* z = logits + r * n.out;
      float mx = *std::max_element(z, z + n.out);
      double sum = 0;
      for (int64_t c = 0; c < n.out; ++c) sum += std::exp(z[c] - mx);
      loss += std::log(sum) + mx - z[labels[r]];
    }
    out[0] = static_cast<float>(loss / static_cast<double>(n.rows));
  } else if (n.op == DLHOST_OP_MSE_LOSS) {
    const Tensor& p = m.tensors[n.inputs[0]];
    const float* x = alias<float>(p.value);
    const float* t = alias<float>(m.tensors[n.inputs[1]].value);
    double s = 0;
    for (int64_t i = 0; i < p.count; ++i) s += double(x[i] - t[i]) * (x[i] - t[i]);
    out[0] = static_cast<float>(s / static_cast<double>(p.count));
  }
}

// Accumulates into the inputs' gradients (zeroed at the start of backward) and overwrites the
// parameters' gradients.
void backward_node(Model& m, const Node& n) {
  const Tensor& y = m.tensors[n.output];
  if (n.op == DLHOST_OP_FC) {
    const Tensor& xt = m.tensors[n.inputs[0]];
    const float* x = alias<float>(xt.value);
    const float* dy = alias<float>(y.grad);
    const Param& wp = m.params[n.params[0]];
    const float* w = alias<float>(wp.value);
    float* dw = alias<float>(wp.grad);
    std::fill_n(dw, wp.count, 0.f);
    for (int64_t r = 0; r < n.rows; ++r)
      for (int64_t o = 0; o < n.out; ++o)
        for (int64_t i = 0; i < n.in; ++i) dw[o * n.in + i] += dy[r * n.out + o] * x[r * n.in + i];
    if (n.params.size() > 1) {
      float* db = alias<float>(m.params[n.params[1]].grad);
      std::fill_n(db, n.out, 0.f);
      for (int64_t r = 0; r < n.rows; ++r)
        for (int64_t o = 0; o < n.out; ++o) db[o] += dy[r * n.out + o];
    }
    if (xt.grad != nullptr) {
      float* dx = alias<float>(xt.grad);
      for (int64_t r = 0; r < n.rows; ++r)
        for (int64_t o = 0; o < n.out; ++o)
          for (int64_t i = 0; i < n.in; ++i)
            dx[r * n.in + i] += dy[r * n.out + o] * w[o * n.in + i];
    }
  } else if (n.op == DLHOST_OP_ACTIVATION) {
    const Tensor& xt = m.tensors[n.inputs[0]];
    if (xt.grad == nullptr) return;
    const float* out = alias<float>(y.value);
    const float* dy = alias<float>(y.grad);
    float* dx = alias<float>(xt.grad);
    for (int64_t i = 0; i < y.count; ++i) dx[i] += dy[i] * activation_grad(n.activation, out[i]);
  } else if (n.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY) {
    const Tensor& lt = m.tensors[n.inputs[0]];
    const float* z = alias<float>(lt.value);
    const int32_t* labels = alias<int32_t>(m.tensors[n.inputs[1]].value);
    float* dz = alias<float>(lt.grad);
    const float scale = 1.f / static_cast<float>(n.rows);
    for (int64_t r = 0; r < n.rows; ++r) {
      const float* zr = z + r * n.out;
      float mx = *std::max_element(zr, zr + n.out);
      double sum = 0;
      for (int64_t c = 0; c < n.out; ++c) sum += std::exp(zr[c] - mx);
      for (int64_t c = 0; c < n.out; ++c) {
        float p = static_cast<float>(std::exp(zr[c] - mx) / sum);
        dz[r * n.out + c] += (p - (c == labels[r] ? 1.f : 0.f)) * scale;
      }
    }
  } else if (n.op == DLHOST_OP_MSE_LOSS) {
    const Tensor& p = m.tensors[n.inputs[0]];
    const float* x = alias<float>(p.value);
    const float* t = alias<float>(m.tensors[n.inputs[1]].value);
    float* dx = alias<float>(p.grad);
    const float scale = 2.f / static_cast<float>(p.count);
    for (int64_t i = 0; i < p.count; ++i) dx[i] += scale * (x[i] - t[i]);
  }
}

void sgd(Model& m) {
  const dlhost_optimizer_desc& o = m.opt;
  float clip = 1.f;
  if (o.clip_norm > 0) {
    double sq = 0;
    for (const Param& p : m.params) {
      const float* g = alias<float>(p.grad);
      for (int64_t i = 0; i < p.count; ++i) sq += double(g[i]) * g[i];
    }
    double norm = std::sqrt(sq);
    if (norm > o.clip_norm) clip = static_cast<float>(o.clip_norm / norm);
  }
  for (const Param& p : m.params) {
    float* w = alias<float>(p.value);
    const float* g = alias<float>(p.grad);
    float* v = alias<float>(p.momentum);
    for (int64_t i = 0; i < p.count; ++i) {
      v[i] = o.momentum * v[i] + (clip * g[i] + o.weight_decay * w[i]);
      w[i] -= o.learning_rate * v[i];
    }
  }
}

// --- compile -------------------------------------------------------------------------------------

Node lower(const dlhost_graph* g, const dlhost_node& gn) {
  Node n;
  n.op = gn.op;
  n.inputs.assign(gn.inputs, gn.inputs + gn.num_inputs);
  n.params.assign(gn.params, gn.params + gn.num_params);
  n.output = gn.output;
  const auto& out = sdk::tensor(g, gn.output);
  switch (gn.op) {
    case DLHOST_OP_INPUT:
      break;
    case DLHOST_OP_FC: {
      const auto* a = static_cast<const dlhost_fc_attrs*>(gn.attrs);
      int32_t batch_dims = DLHOST_HAS_FIELD(a, dlhost_fc_attrs, batch_dims) ? a->batch_dims : 1;
      n.out = a->out_features;
      n.rows = 1;
      for (int32_t d = 0; d < batch_dims; ++d) n.rows *= out.dims[d];
      n.in = sdk::element_count(sdk::tensor(g, n.inputs[0])) / n.rows;
      break;
    }
    case DLHOST_OP_ACTIVATION:
      n.activation = static_cast<const dlhost_activation_attrs*>(gn.attrs)->kind;
      break;
    case DLHOST_OP_SOFTMAX_CROSS_ENTROPY: {
      const auto& logits = sdk::tensor(g, n.inputs[0]);
      if (logits.rank != 2)
        sdk::unimplemented("async_device: softmax_cross_entropy over rank-" +
                           std::to_string(logits.rank) + " logits (only [N, C])");
      n.rows = logits.dims[0];
      n.out = logits.dims[1];
      break;
    }
    case DLHOST_OP_MSE_LOSS:
      break;
    default:
      sdk::unimplemented("async_device: op " + std::to_string(gn.op) + " (node '" + gn.name +
                         "') is not implemented");
  }
  return n;
}

Model* compile(Context& ctx, const dlhost_graph* g, const dlhost_optimizer_desc* opt) {
  auto m = std::make_unique<Model>();
  m->ctx = &ctx;
  m->opt = *opt;
  m->loss = g->loss;
  {
    std::lock_guard<std::mutex> lock(ctx.models_mu);
    ctx.models.push_back(m.get());
  }
  for (int32_t i = 0; i < g->num_nodes; ++i) m->nodes.push_back(lower(g, *g->nodes[i]));
  m->tensors.resize(static_cast<size_t>(g->num_tensors));
  for (int32_t i = 0; i < g->num_tensors; ++i) {
    const auto& t = *g->tensors[i];
    Tensor& d = m->tensors[static_cast<size_t>(i)];
    d.count = std::max<int64_t>(sdk::element_count(t), 1);
    d.dtype = t.dtype;
    d.value = m->device_floats(d.count);
    bool is_input = std::find(g->inputs, g->inputs + g->num_inputs, i) != g->inputs + g->num_inputs;
    if (!is_input) d.grad = m->device_floats(d.count);
  }
  for (int32_t i = 0; i < g->num_params; ++i) {
    Param p;
    p.count = g->params[i]->count;
    p.value = m->device_floats(p.count);
    p.grad = m->device_floats(p.count);
    p.momentum = m->device_floats(p.count);
    m->params.push_back(p);
  }
  return m.release();
}

void backward(Model& m, const dlhost_grad_ready* ready) {
  m.launch([&m] {
    for (const Tensor& t : m.tensors)
      if (t.grad != nullptr) std::fill_n(alias<float>(t.grad), t.count, 0.f);
  });
  for (auto it = m.nodes.rbegin(); it != m.nodes.rend(); ++it) {
    const Node* n = &*it;
    if (n->op == DLHOST_OP_INPUT) continue;
    m.launch([&m, n] {
      backward_node(m, *n);
      for (int32_t p : n->params) m.params[static_cast<size_t>(p)].produced = true;
    });
    // Enqueued, not done: the host must order its use of the gradient after this point.
    if (ready != nullptr && ready->fn != nullptr)
      for (int32_t p : n->params) ready->fn(ready->user, p);
  }
}

// --- ABI 1.2 extensions --------------------------------------------------------------------------

struct Event {
  Model* model = nullptr;
  std::atomic<int> state{0};  // 0 never recorded, 1 recorded and pending, 2 reached
  Clock::time_point when;
};

// On the stream: fails when [device_src, +bytes) overlaps a gradient backward has not produced in
// this step (a read the host did not order after the gradient's work).
void check_produced(const Model& m, const void* device_src, uint64_t bytes) {
  auto a = reinterpret_cast<uintptr_t>(device_src);
  for (size_t i = 0; i < m.params.size(); ++i) {
    const Param& p = m.params[i];
    auto g = reinterpret_cast<uintptr_t>(p.grad);
    if (a < g + uint64_t(p.count) * 4 && g < a + bytes && !p.produced)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
                "early read: the gradient of parameter " + std::to_string(i) +
                    " was read before the backward work that produces it (or after the next "
                    "step's forward began)");
  }
}

// An unordered access (the context's default queue) while device work is queued could see
// memory mid-write: refused, as a race detector would flag it.
void check_unordered(Context& c, const char* what) {
  std::lock_guard<std::mutex> lock(c.models_mu);
  for (Model* m : c.models)
    if (!m->stream.idle())
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
                std::string("early read: unordered ") + what +
                    " (model NULL) while a stream of the context has work queued; order it on "
                    "the model's stream or wait for an event first");
}

// `device_src` is the device address read (nullptr when the copy reads host memory).
void copy_on_stream(dlhost_context* c, dlhost_model* m, void* dst, const void* src, uint64_t n,
                    const void* device_src) {
  if (m != nullptr) {
    Model& model = model_of(m);
    model.launch([=, &model] {
      if (device_src != nullptr) check_produced(model, device_src, n);
      std::memcpy(dst, src, n);
    });
    model.synchronize();
  } else {
    check_unordered(context_of(c), "copy");
    std::memcpy(dst, src, n);  // the context's default queue: synchronous
  }
}

void check_device(dlhost_context* c, const dlhost_buffer* b, uint64_t offset, uint64_t bytes) {
  if (b == nullptr || !context_of(c).arena.owns(b->data) || offset + bytes > b->bytes)
    sdk::invalid("async_device: copy outside a device buffer of this context");
}

const dlhost_backend_caps_ext kCaps = [] {
  dlhost_backend_caps_ext e{};
  e.struct_size = DLHOST_BACKEND_CAPS_EXT_STRUCT_SIZE;
  e.type = DLHOST_EXT_BACKEND_CAPS;
  e.capabilities = [](dlhost_backend_caps* out) {
    return sdk::guard([&] {
      static const int32_t ops[] = {DLHOST_OP_INPUT, DLHOST_OP_FC, DLHOST_OP_ACTIVATION,
                                    DLHOST_OP_SOFTMAX_CROSS_ENTROPY, DLHOST_OP_MSE_LOSS};
      if (out == nullptr || out->struct_size < DLHOST_BACKEND_CAPS_STRUCT_SIZE)
        sdk::invalid("async_device: capabilities needs a 1.2 dlhost_backend_caps");
      out->ops = ops;
      out->op_count = static_cast<int32_t>(sizeof(ops) / sizeof(ops[0]));
      out->dtypes = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_I32);
      out->precisions = 1u << DLHOST_PRECISION_FP32;
      out->memory_spaces = 1u << DLHOST_MEMORY_DEVICE;
      out->asynchronous = 1;
    });
  };
  return e;
}();

const dlhost_stream_ext kStream = [] {
  dlhost_stream_ext e{};
  e.struct_size = DLHOST_STREAM_EXT_STRUCT_SIZE;
  e.type = DLHOST_EXT_STREAM;
  e.next = reinterpret_cast<const dlhost_extension*>(&kCaps);
  e.model_stream = [](dlhost_model* m, dlhost_stream* out) {
    return sdk::guard([&] {
      out->kind = DLHOST_STREAM_HOST_QUEUE;
      out->device = model_of(m).ctx->device;
      out->handle = model_of(m).stream.handle();
    });
  };
  return e;
}();

const dlhost_events_ext kEvents = [] {
  dlhost_events_ext e{};
  e.struct_size = DLHOST_EVENTS_EXT_STRUCT_SIZE;
  e.type = DLHOST_EXT_EVENTS;
  e.next = reinterpret_cast<const dlhost_extension*>(&kStream);
  e.event_create = [](dlhost_model* m, dlhost_event** out) {
    return sdk::guard([&] {
      auto* ev = new Event;
      ev->model = &model_of(m);
      *out = reinterpret_cast<dlhost_event*>(ev);
    });
  };
  e.event_destroy = [](dlhost_event* ev) { delete reinterpret_cast<Event*>(ev); };
  e.event_record = [](dlhost_event* h) {
    return sdk::guard([&] {
      auto* ev = reinterpret_cast<Event*>(h);
      ev->state = 1;
      // Not launch(): a timestamp must not be delayed by delay_us.
      ev->model->stream.enqueue([ev] {
        ev->when = Clock::now();
        ev->state = 2;
      });
    });
  };
  e.event_query = [](dlhost_event* h, int32_t* done) {
    return sdk::guard([&] { *done = reinterpret_cast<Event*>(h)->state.load() == 2 ? 1 : 0; });
  };
  e.event_synchronize = [](dlhost_event* h) {
    return sdk::guard([&] {
      auto* ev = reinterpret_cast<Event*>(h);
      if (ev->state.load() == 0) sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "event never recorded");
      ev->model->stream.synchronize();
    });
  };
  e.event_elapsed_ms = [](dlhost_event* a, dlhost_event* b, double* ms) {
    return sdk::guard([&] {
      auto* s = reinterpret_cast<Event*>(a);
      auto* t = reinterpret_cast<Event*>(b);
      if (s->state.load() != 2 || t->state.load() != 2)
        sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
                  "async_device: elapsed time of an event "
                  "that has not completed");
      *ms = std::chrono::duration<double, std::milli>(t->when - s->when).count();
    });
  };
  return e;
}();

const dlhost_device_memory_ext kMemory = [] {
  dlhost_device_memory_ext e{};
  e.struct_size = DLHOST_DEVICE_MEMORY_EXT_STRUCT_SIZE;
  e.type = DLHOST_EXT_DEVICE_MEMORY;
  e.next = reinterpret_cast<const dlhost_extension*>(&kEvents);
  e.memory_stats = [](dlhost_model* m, dlhost_memory_stats* out) {
    return sdk::guard([&] {
      Model& model = model_of(m);
      out->in_use_bytes = model.bytes;
      out->peak_bytes = model.ctx->arena.peak();
      out->total_bytes = fake_device::kWindow;
      out->free_bytes = fake_device::kWindow - model.ctx->arena.in_use();
    });
  };
  e.buffer_alloc = [](dlhost_context* c, uint64_t bytes, int32_t dtype, dlhost_buffer* out) {
    return sdk::guard([&] {
      void* p = context_of(c).arena.allocate(bytes);
      out->data = p;
      out->bytes = bytes;
      out->dtype = dtype;
      out->memory_space = DLHOST_MEMORY_DEVICE;
      out->device = context_of(c).device;
    });
  };
  e.buffer_free = [](dlhost_context* c, const dlhost_buffer* b) {
    if (c != nullptr && b != nullptr && b->data != nullptr) context_of(c).arena.release(b->bytes);
  };
  e.copy_to_host = [](dlhost_context* c, dlhost_model* m, const dlhost_buffer* src, uint64_t offset,
                      void* dst, uint64_t bytes) {
    return sdk::guard([&] {
      check_device(c, src, offset, bytes);
      copy_on_stream(c, m, dst, alias<char>(src->data) + offset, bytes,
                     static_cast<const char*>(src->data) + offset);
    });
  };
  e.copy_from_host = [](dlhost_context* c, dlhost_model* m, const void* src,
                        const dlhost_buffer* dst, uint64_t offset, uint64_t bytes) {
    return sdk::guard([&] {
      check_device(c, dst, offset, bytes);
      copy_on_stream(c, m, alias<char>(dst->data) + offset, src, bytes, nullptr);
    });
  };
  e.host_alloc = [](dlhost_context*, uint64_t bytes, void** out) {
    return sdk::guard([&] {
      void* p = std::malloc(bytes);
      if (p == nullptr) throw std::bad_alloc();
      *out = p;
    });
  };
  e.host_free = [](dlhost_context*, void* p) { std::free(p); };
  e.input_buffer = [](dlhost_model* m, int32_t tensor, dlhost_buffer* out) {
    return sdk::guard([&] {
      const Tensor& t = model_of(m).tensors.at(static_cast<size_t>(tensor));
      out->data = t.value;
      out->bytes = static_cast<uint64_t>(t.count) * 4;
      out->dtype = t.dtype;
      out->memory_space = DLHOST_MEMORY_DEVICE;
      out->device = model_of(m).ctx->device;
    });
  };
  e.copy_device = [](dlhost_model* m, const dlhost_buffer* src, uint64_t src_offset,
                     const dlhost_buffer* dst, uint64_t dst_offset, uint64_t bytes) {
    return sdk::guard([&] {
      Model& model = model_of(m);
      auto* ctx = reinterpret_cast<dlhost_context*>(model.ctx);
      check_device(ctx, src, src_offset, bytes);
      check_device(ctx, dst, dst_offset, bytes);
      const char* from = static_cast<const char*>(src->data) + src_offset;
      char* to = static_cast<char*>(dst->data) + dst_offset;
      model.launch([&model, from, to, bytes] {
        check_produced(model, from, bytes);
        std::memcpy(alias<char>(to), alias<char>(from), bytes);
      });
    });
  };
  return e;
}();

const dlhost_option_decl kDelay = {DLHOST_OPTION_DECL_STRUCT_SIZE,
                                   "delay_us",
                                   DLHOST_OPTION_INT,
                                   "0",
                                   "microseconds every device task sleeps before it runs",
                                   nullptr};
const dlhost_option_decl kMisreport = {
    DLHOST_OPTION_DECL_STRUCT_SIZE,
    "misreport_memory_space",
    DLHOST_OPTION_BOOL,
    "false",
    "param_buffers says HOST for device buffers (to test that a host reading them is caught)",
    nullptr};
const dlhost_option_decl* const kDecls[] = {&kDelay, &kMisreport};
const dlhost_option_schema_ext kSchema = {
    DLHOST_OPTION_SCHEMA_EXT_STRUCT_SIZE, DLHOST_EXT_OPTION_SCHEMA,
    reinterpret_cast<const dlhost_extension*>(&kMemory), 2, kDecls};

// --- the 1.1 table -------------------------------------------------------------------------------

const dlhost_device_info* device() {
  static dlhost_device_info info = [] {
    auto d = sdk::make_struct<dlhost_device_info>(DLHOST_DEVICE_INFO_STRUCT_SIZE);
    d.kind = DLHOST_DEVICE_GPU;
    d.name = "fake0";
    d.model = "fake device (CPU worker thread, protected memory)";
    d.cores = 1;
    d.isa = "none";
    d.memory_bytes = fake_device::kWindow;
    d.library = "async_device fixture";
    return d;
  }();
  return &info;
}

void check_buffer(const dlhost_buffer* b, const char* what) {
  if (b == nullptr || b->struct_size < DLHOST_BUFFER_STRUCT_SIZE)
    sdk::invalid(std::string("async_device: param_buffers: ") + what + " is not a dlhost_buffer");
}

void fill(const Context& c, dlhost_buffer* b, float* p, int64_t count) {
  b->data = p;
  b->bytes = static_cast<uint64_t>(count) * 4;
  b->dtype = DLHOST_DTYPE_F32;
  b->memory_space = c.misreport_memory_space ? DLHOST_MEMORY_HOST : DLHOST_MEMORY_DEVICE;
  b->device = c.device;
}

int32_t fake_devices() {
  const char* n = std::getenv("DLHOST_FAKE_DEVICES");
  return n != nullptr && std::atoi(n) > 0 ? std::atoi(n) : 2;
}

const dlhost_backend_api kApi = [] {
  auto t = sdk::make_struct<dlhost_backend_api>(DLHOST_BACKEND_API_STRUCT_SIZE);
  t.device_count = [] { return fake_devices(); };
  t.device_info = [](int32_t, const dlhost_device_info** out) {
    return sdk::guard([&] { *out = device(); });
  };
  t.context_create = [](int32_t device, const dlhost_options* options, dlhost_context** out) {
    return sdk::guard([&] {
      // It declares fp32 alone (capabilities), so it refuses the rest as a kit backend does.
      const char* precision = sdk::host()->option_get(options, "precision");
      if (precision != nullptr && std::string(precision) != "fp32")
        sdk::unimplemented(std::string("async_device: precision '") + precision +
                           "' is not implemented");
      if (device < 0 || device >= fake_devices())
        sdk::invalid("async_device: no device " + std::to_string(device));
      auto* c = new Context;
      c->device = device;
      c->delay_us = sdk::option_int(options, "delay_us", 0);
      const char* lie = sdk::host()->option_get(options, "misreport_memory_space");
      c->misreport_memory_space = lie != nullptr && std::string(lie) == "true";
      *out = reinterpret_cast<dlhost_context*>(c);
    });
  };
  t.context_destroy = [](dlhost_context* c) { delete reinterpret_cast<Context*>(c); };
  t.compile = [](dlhost_context* c, const dlhost_graph* g, const dlhost_optimizer_desc* opt,
                 const dlhost_options*, dlhost_model** out) {
    return sdk::guard(
        [&] { *out = reinterpret_cast<dlhost_model*>(compile(context_of(c), g, opt)); });
  };
  t.model_destroy = [](dlhost_model* m) { delete reinterpret_cast<Model*>(m); };
  t.model_info = [](dlhost_model* m, dlhost_model_info* out) {
    return sdk::guard([&] {
      out->threads = 1;
      out->implementation = "async_device: plain loops on a worker-thread stream";
      out->param_bytes = 0;
      for (const Param& p : model_of(m).params) out->param_bytes += uint64_t(p.count) * 4;
      out->workspace_bytes = model_of(m).bytes - out->param_bytes;
    });
  };
  t.set_input = [](dlhost_model* m, int32_t tensor, const void* data, size_t bytes) {
    return sdk::guard([&] {
      Model& model = model_of(m);
      const Tensor& in = model.tensors.at(static_cast<size_t>(tensor));
      if (bytes != static_cast<size_t>(in.count) * 4)
        sdk::invalid("async_device: set_input of " + std::to_string(bytes) +
                     " bytes for a tensor of " + std::to_string(in.count * 4));
      // `data` is borrowed for the call only: wait for the copy, as a pageable cudaMemcpy does.
      copy_on_stream(nullptr, m, alias<char>(in.value), data, bytes, nullptr);
    });
  };
  t.forward = [](dlhost_model* m) {
    return sdk::guard([&] {
      Model& model = model_of(m);
      model.launch([&model] {
        for (Param& p : model.params) p.produced = false;  // a new step: last step's are stale
        for (const Node& n : model.nodes)
          if (n.op != DLHOST_OP_INPUT) forward_node(model, n);
      });
    });
  };
  t.backward = [](dlhost_model* m, const dlhost_grad_ready* ready) {
    return sdk::guard([&] { backward(model_of(m), ready); });
  };
  t.update = [](dlhost_model* m) {
    return sdk::guard([&] {
      Model& model = model_of(m);
      model.launch([&model] { sgd(model); });
    });
  };
  t.synchronize = [](dlhost_model* m) { return sdk::guard([&] { model_of(m).synchronize(); }); };
  t.read_loss = [](dlhost_model* m, float* loss) {
    return sdk::guard([&] {
      Model& model = model_of(m);
      model.synchronize();
      *loss = *alias<float>(model.tensors[static_cast<size_t>(model.loss)].value);
    });
  };
  t.param_buffers = [](dlhost_model* m, int32_t param, dlhost_buffer* value, dlhost_buffer* grad) {
    return sdk::guard([&] {
      const Param& p = model_of(m).params.at(static_cast<size_t>(param));
      check_buffer(value, "value");
      check_buffer(grad, "grad");
      fill(*model_of(m).ctx, value, p.value, p.count);
      fill(*model_of(m).ctx, grad, p.grad, p.count);
    });
  };
  t.read_param = [](dlhost_model* m, int32_t param, int32_t part, void* data, size_t bytes) {
    return sdk::guard([&] {
      Model& model = model_of(m);
      const Param& p = model.params.at(static_cast<size_t>(param));
      if (bytes != static_cast<size_t>(p.count) * 4) sdk::invalid("async_device: read_param size");
      model.synchronize();
      std::memcpy(data, alias<float>(part == DLHOST_PARAM_GRAD ? p.grad : p.value), bytes);
    });
  };
  t.write_param = [](dlhost_model* m, int32_t param, int32_t part, const void* data, size_t bytes) {
    return sdk::guard([&] {
      Model& model = model_of(m);
      const Param& p = model.params.at(static_cast<size_t>(param));
      if (bytes != static_cast<size_t>(p.count) * 4) sdk::invalid("async_device: write_param size");
      copy_on_stream(nullptr, m, alias<float>(part == DLHOST_PARAM_GRAD ? p.grad : p.value), data,
                     bytes, nullptr);
    });
  };
  t.memory_in_use = [](dlhost_model* m, uint64_t* bytes) {
    return sdk::guard([&] { *bytes = model_of(m).bytes; });
  };
  return t;
}();

const dlhost_plugin kPlugin = [] {
  auto p = sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
  p.abi_major = DLHOST_ABI_MAJOR;
  p.abi_minor = DLHOST_ABI_MINOR;
  p.kind = DLHOST_PLUGIN_BACKEND;
  p.name = "async_device";
  p.version = "1.0.0";
  p.description =
      "test fixture: an asynchronous backend on a fake device (CPU thread stream, "
      "protected device memory, timed events)";
  p.backend = &kApi;
  p.extensions = reinterpret_cast<const dlhost_extension*>(&kSchema);
  return p;
}();

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::attach_host(host, "async_device") ? &kPlugin : nullptr;
}
