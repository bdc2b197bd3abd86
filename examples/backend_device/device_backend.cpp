// device_backend.cpp — `example_device`, the starting point of a GPU-like backend: a backend on
// a device with its own memory and an asynchronous stream, written on the SDK's backend kit with
// its device virtuals (Backend::device_virtuals(); docs/plugin-sdk.md, "Device backends"), and
// run on the SDK's simulated device (dlhost/sim_device.hpp), so it builds, conforms and trains on
// any Linux machine. To port it to real hardware, replace the four device primitives it uses:
//   sim::Memory::allocate/release -> cudaMalloc/cudaFree (or the vendor's allocator),
//   sim::Stream::enqueue          -> a kernel launch / cudaMemcpyAsync on the model's stream,
//   sim::Stream::synchronize      -> cudaStreamSynchronize,
//   sim::StreamEvent              -> cudaEvent_t (record, query, synchronize, elapsed time),
// and the kernels (plain loops on the stream, reading device memory through sim::alias, as a
// kernel reads its arguments).
//
// Ops: fully connected, ReLU/sigmoid/tanh, softmax cross-entropy, MSE: an MLP (conform's fc,
// activation and loss problems, the example_mlp network). Anything else is UNIMPLEMENTED.
// forward, backward and update enqueue work and return at once; backward reports a gradient
// ready when its work is enqueued (the ABI's rule for a device backend). Parameters, gradients
// and activations live in device memory: the host touching one faults, so a host path that
// forgets a copy is caught here, not on the customer's GPU.
// Thread-safety: a model is used from one host thread at a time (the ABI's rule); kernels run on
// the stream's thread, one at a time, in order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlhost/backend_kit.hpp"
#include "dlhost/cpu_kit.hpp"  // sum_of_squares, clip_scale, sgd_step: the documented SGD order
#include "dlhost/graph_access.hpp"
#include "dlhost/sim_device.hpp"

namespace device_example {

namespace sdk = dlhost::sdk;
namespace sim = dlhost::sdk::sim;
using sim::alias;

// What one opened device holds: its memory (a real backend: the device handle, its allocator).
struct Device {
  int32_t index = 0;
  sim::Memory memory;
};

// A tensor or parameter: device addresses (never dereferenced on the host).
struct Buffer {
  float* value = nullptr;
  float* grad = nullptr;      // none for graph inputs
  float* velocity = nullptr;  // parameters with momentum only
  int64_t count = 0;
  int32_t dtype = DLHOST_DTYPE_F32;  // I32 ids (labels) take F32's 4 bytes
};

struct Node {
  int32_t op = 0, out = -1, kind = 0;  // kind: the activation function
  std::vector<int32_t> in, params;
  sdk::FcGeometry fc;
};

// An event on the model's stream: the device's timestamp when the stream reaches it.
class DeviceEvent final : public sdk::Event {
 public:
  explicit DeviceEvent(sim::Stream& stream) : stream_(stream) {}
  void record() override { mark_.record(stream_); }
  bool done() override { return mark_.done(); }
  void synchronize() override { mark_.synchronize(); }
  double elapsed_ms_since(sdk::Event& start) override {
    double ms = 0;
    if (!mark_.elapsed_ms_since(static_cast<DeviceEvent&>(start).mark_, &ms))
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
                "example_device: event_elapsed_ms: an event was not recorded or not reached");
    return ms;
  }

 private:
  sim::Stream& stream_;
  sim::StreamEvent mark_;
};

class DeviceModel final : public sdk::Model {
 public:
  DeviceModel(Device& device, const dlhost_graph& g, const dlhost_optimizer_desc& opt)
      : device_(device), opt_(opt), loss_(g.loss) {
    if (opt.kind != DLHOST_OPTIMIZER_SGD) sdk::unimplemented("example_device: SGD only");
    inputs_.assign(g.inputs, g.inputs + g.num_inputs);
    for (int32_t t = 0; t < g.num_tensors; ++t) {
      const bool input = std::count(inputs_.begin(), inputs_.end(), t) > 0;
      tensors_.push_back(make(sdk::element_count(*g.tensors[t]), !input, false));
      tensors_.back().dtype = g.tensors[t]->dtype;
    }
    for (int32_t p = 0; p < g.num_params; ++p)
      params_.push_back(make(g.params[p]->count, true, opt.momentum != 0.0f));
    for (int32_t k = 0; k < g.num_nodes; ++k) lower(g, *g.nodes[k]);
  }
  ~DeviceModel() override {
    stream_.synchronize();  // nothing may still run on memory given back below
    for (const std::vector<Buffer>* list : {&tensors_, &params_})
      for (const Buffer& b : *list)
        for (const float* p : {b.value, b.grad, b.velocity})
          if (p != nullptr) device_.memory.release(uint64_t(b.count) * 4);
  }

  // `data` is borrowed for the call: upload on the stream and wait (a pageable cudaMemcpy).
  void set_input(int32_t id, const void* data, size_t bytes) override {
    if (std::count(inputs_.begin(), inputs_.end(), id) == 0)
      sdk::invalid("example_device: set_input: tensor " + std::to_string(id) + " is no input");
    const Buffer& t = tensor(id);
    upload(t.value, data, bytes, size_t(t.count) * 4);
  }
  void forward() override {
    stream_.enqueue([this] {
      for (const Node& n : nodes_) forward_kernel(n);
    });
  }
  // Each node's backward is its own launch, so each gradient is ready as soon as it is enqueued.
  void backward(const dlhost_grad_ready* ready) override {
    stream_.enqueue([this] {
      for (const Buffer& t : tensors_)
        if (t.grad != nullptr) std::fill_n(alias<float>(t.grad), t.count, 0.0f);
      alias<float>(tensor(loss_).grad)[0] = 1.0f;
    });
    for (auto n = nodes_.rbegin(); n != nodes_.rend(); ++n) {
      stream_.enqueue([this, n = &*n] { backward_kernel(*n); });
      for (int32_t p : n->params)
        if (ready != nullptr && ready->fn != nullptr) ready->fn(ready->user, p);
    }
  }
  // The kit's SGD steps in the documented order, run on the device (clip, weight decay, momentum).
  void update() override {
    stream_.enqueue([this] {
      double sum = 0;
      for (const Buffer& p : params_) sum += sdk::sum_of_squares(alias<float>(p.grad), n(p));
      const double scale = sdk::clip_scale(sum, opt_.clip_norm);
      for (const Buffer& p : params_)
        sdk::sgd_step(opt_, scale, alias<float>(p.grad), alias<float>(p.value),
                      p.velocity != nullptr ? alias<float>(p.velocity) : nullptr, n(p));
    });
  }
  // A failure inside device work is sticky, as a CUDA error is: every later wait reports it.
  void synchronize() override {
    stream_.synchronize();
    if (error_.empty()) error_ = stream_.take_error();
    if (!error_.empty()) sdk::fail(DLHOST_CODE_INTERNAL, "example_device: device work: " + error_);
  }
  float loss() const override { return alias<float>(tensor(loss_).value)[0]; }

  void param_buffers(int32_t id, dlhost_buffer* value, dlhost_buffer* grad) override {
    const Buffer& p = param(id);
    sdk::fill_buffer(value, p.value, n(p) * 4, DLHOST_DTYPE_F32, DLHOST_MEMORY_DEVICE, index());
    sdk::fill_buffer(grad, p.grad, n(p) * 4, DLHOST_DTYPE_F32, DLHOST_MEMORY_DEVICE, index());
  }
  void read_param(int32_t id, int32_t part, void* data, size_t bytes) override {
    const Buffer& p = param(id);
    download(data, part == DLHOST_PARAM_GRAD ? p.grad : p.value, bytes, n(p) * 4);
  }
  void write_param(int32_t id, int32_t part, const void* data, size_t bytes) override {
    const Buffer& p = param(id);
    upload(part == DLHOST_PARAM_GRAD ? p.grad : p.value, data, bytes, n(p) * 4);
  }
  void read_tensor(int32_t id, void* data, size_t bytes) override {
    const Buffer& t = tensor(id);
    if (t.dtype != DLHOST_DTYPE_F32)
      sdk::invalid("example_device: read_tensor: tensor " + std::to_string(id) + " is not F32");
    download(data, t.value, bytes, size_t(t.count) * 4);
  }
  sdk::ModelInfo info() const override {
    sdk::ModelInfo i;
    i.implementation = "plain loops on a simulated device's stream (example_device)";
    for (const Buffer& p : params_) i.param_bytes += n(p) * 4;
    i.workspace_bytes = bytes_ - i.param_bytes;
    return i;
  }
  uint64_t memory_in_use() const override { return bytes_; }

  // --- the device virtuals ------------------------------------------------------------------
  dlhost_stream model_stream() override {
    return {DLHOST_STREAM_STRUCT_SIZE, DLHOST_STREAM_HOST_QUEUE, index(), stream_.handle()};
  }
  std::unique_ptr<sdk::Event> create_event() override {
    return std::make_unique<DeviceEvent>(stream_);
  }
  dlhost_memory_stats memory_stats() override {
    auto m = sdk::make_struct<dlhost_memory_stats>(DLHOST_MEMORY_STATS_STRUCT_SIZE);
    m.in_use_bytes = bytes_;
    m.peak_bytes = device_.memory.peak();
    m.total_bytes = device_.memory.total();
    m.free_bytes = m.total_bytes - device_.memory.in_use();
    return m;
  }
  // Copies ordered on the stream; the two with host memory wait, copy_device does not.
  void copy_to_host(const dlhost_buffer& src, uint64_t offset, void* dst, uint64_t bytes) override {
    const char* from = range(src, offset, bytes);
    stream_.enqueue([=] { std::memcpy(dst, alias<char>(from), bytes); });
    synchronize();
  }
  void copy_from_host(const void* src, const dlhost_buffer& dst, uint64_t offset,
                      uint64_t bytes) override {
    char* to = range(dst, offset, bytes);
    stream_.enqueue([=] { std::memcpy(alias<char>(to), src, bytes); });
    synchronize();
  }
  void copy_device(const dlhost_buffer& src, uint64_t src_offset, const dlhost_buffer& dst,
                   uint64_t dst_offset, uint64_t bytes) override {
    const char* from = range(src, src_offset, bytes);
    char* to = range(dst, dst_offset, bytes);
    stream_.enqueue([=] { std::memmove(alias<char>(to), alias<char>(from), bytes); });
  }
  dlhost_buffer input_buffer(int32_t id) override {
    const Buffer& t = tensor(id);
    auto b = sdk::make_struct<dlhost_buffer>(DLHOST_BUFFER_STRUCT_SIZE);
    sdk::fill_buffer(&b, t.value, uint64_t(t.count) * 4, t.dtype, DLHOST_MEMORY_DEVICE, index());
    return b;
  }

 private:
  static size_t n(const Buffer& b) { return size_t(b.count); }
  int32_t index() const { return device_.index; }
  float* allocate(int64_t count) {
    bytes_ += uint64_t(count) * 4;
    return static_cast<float*>(device_.memory.allocate(uint64_t(count) * 4));
  }
  Buffer make(int64_t count, bool grad, bool velocity) {
    Buffer b;
    b.count = count;
    b.value = allocate(count);
    if (grad) b.grad = allocate(count);
    if (velocity) b.velocity = allocate(count);
    return b;
  }
  const Buffer& tensor(int32_t id) const {
    if (id < 0 || size_t(id) >= tensors_.size())
      sdk::invalid("example_device: no tensor " + std::to_string(id));
    return tensors_[size_t(id)];
  }
  const Buffer& param(int32_t id) const {
    if (id < 0 || size_t(id) >= params_.size())
      sdk::invalid("example_device: no parameter " + std::to_string(id));
    return params_[size_t(id)];
  }
  // The device address [offset, offset + bytes) of `b`, checked to lie in this device's memory.
  char* range(const dlhost_buffer& b, uint64_t offset, uint64_t bytes) const {
    if (b.memory_space != DLHOST_MEMORY_DEVICE || offset > b.bytes || bytes > b.bytes - offset ||
        !device_.memory.owns(static_cast<char*>(b.data) + offset, bytes))
      sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "example_device: copy of " + std::to_string(bytes) +
                                              " bytes at " + std::to_string(offset) +
                                              " outside a device buffer of this device");
    return static_cast<char*>(b.data) + offset;
  }
  void check_size(const void* data, size_t bytes, size_t want) const {
    if (data == nullptr || bytes != want)
      sdk::invalid("example_device: " + std::to_string(want) + " bytes expected, got " +
                   (data == nullptr ? std::string("NULL") : std::to_string(bytes)));
  }
  void upload(float* device, const void* data, size_t bytes, size_t want) {
    check_size(data, bytes, want);
    stream_.enqueue([=] { std::memcpy(alias<char>(device), data, bytes); });
    synchronize();
  }
  void download(void* data, const float* device, size_t bytes, size_t want) {
    check_size(data, bytes, want);
    stream_.enqueue([=] { std::memcpy(data, alias<char>(device), bytes); });
    synchronize();
  }

  // Compile: each node's sizes, read once from the graph (graph_access checks them).
  void lower(const dlhost_graph& g, const dlhost_node& d) {
    Node node;
    node.op = d.op, node.out = d.output;
    node.in.assign(d.inputs, d.inputs + d.num_inputs);
    node.params.assign(d.params, d.params + d.num_params);
    switch (d.op) {
      case DLHOST_OP_INPUT:
        return;  // fed by set_input
      case DLHOST_OP_FC:
        node.fc = sdk::fc_geometry(g, d);
        break;
      case DLHOST_OP_ACTIVATION:
        sdk::expect_inputs(g, d, 1);
        node.kind = sdk::node_attrs<dlhost_activation_attrs>(d).kind;
        break;
      case DLHOST_OP_SOFTMAX_CROSS_ENTROPY: {
        sdk::expect_inputs(g, d, 2);
        const dlhost_tensor_desc& x = sdk::input_tensor(g, d, 0);
        node.fc.out = x.dims[x.rank - 1];  // classes
        node.fc.rows = sdk::element_count(x) / node.fc.out;
        break;
      }
      case DLHOST_OP_MSE_LOSS:
        sdk::expect_inputs(g, d, 2);
        break;
      default:
        sdk::unimplemented("example_device: " + sdk::op_name(d.op) + " (" + sdk::node_label(d) +
                           ") is not implemented");
    }
    nodes_.push_back(std::move(node));
  }

  // --- kernels: run on the stream, on device memory seen through alias -------------------------
  float* value(int32_t id) const { return alias<float>(tensor(id).value); }
  float* grad(int32_t id) const {  // NULL for an input (no gradient)
    return tensor(id).grad != nullptr ? alias<float>(tensor(id).grad) : nullptr;
  }

  void forward_kernel(const Node& node) {
    const float* x = value(node.in[0]);
    float* y = value(node.out);
    const int64_t count = tensor(node.out).count;
    if (node.op == DLHOST_OP_FC) {  // y[r, o] = b[o] + sum_i x[r, i] W[o, i]
      const sdk::FcGeometry& f = node.fc;
      const float* w = alias<float>(param(node.params[0]).value);
      const float* b = f.bias ? alias<float>(param(node.params[1]).value) : nullptr;
      for (int64_t r = 0; r < f.rows; ++r)
        for (int64_t o = 0; o < f.out; ++o) {
          double s = b != nullptr ? b[o] : 0.0;
          for (int64_t i = 0; i < f.in; ++i) s += double(x[r * f.in + i]) * w[o * f.in + i];
          y[r * f.out + o] = float(s);
        }
    } else if (node.op == DLHOST_OP_ACTIVATION) {
      for (int64_t i = 0; i < count; ++i)
        y[i] = node.kind == DLHOST_ACTIVATION_RELU      ? std::max(x[i], 0.0f)
               : node.kind == DLHOST_ACTIVATION_SIGMOID ? 1.0f / (1.0f + std::exp(-x[i]))
                                                        : std::tanh(x[i]);
    } else if (node.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY) {
      y[0] = float(softmax_cross_entropy(node, nullptr));
    } else if (node.op == DLHOST_OP_MSE_LOSS) {  // mean of (x - t)^2
      const float* t = value(node.in[1]);
      const int64_t n = tensor(node.in[0]).count;
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += double(x[i] - t[i]) * (x[i] - t[i]);
      y[0] = float(s / double(n));
    }
  }

  // Adds to the inputs' gradients (zeroed at the start of backward) and overwrites the
  // parameters' gradients.
  void backward_kernel(const Node& node) {
    const float* x = value(node.in[0]);
    float* dx = grad(node.in[0]);
    const float* y = value(node.out);
    const float* dy = grad(node.out);
    if (node.op == DLHOST_OP_FC) {  // dx += dy W, dW = dy^T x, db = sum_r dy
      const sdk::FcGeometry& f = node.fc;
      const float* w = alias<float>(param(node.params[0]).value);
      float* dw = alias<float>(param(node.params[0]).grad);
      float* db = f.bias ? alias<float>(param(node.params[1]).grad) : nullptr;
      std::fill_n(dw, f.out * f.in, 0.0f);
      if (db != nullptr) std::fill_n(db, f.out, 0.0f);
      for (int64_t r = 0; r < f.rows; ++r)
        for (int64_t o = 0; o < f.out; ++o) {
          const float g = dy[r * f.out + o];
          if (db != nullptr) db[o] += g;
          for (int64_t i = 0; i < f.in; ++i) {
            dw[o * f.in + i] += g * x[r * f.in + i];
            if (dx != nullptr) dx[r * f.in + i] += g * w[o * f.in + i];
          }
        }
    } else if (node.op == DLHOST_OP_ACTIVATION && dx != nullptr) {  // from the output y
      for (int64_t i = 0; i < tensor(node.out).count; ++i)
        dx[i] += dy[i] * (node.kind == DLHOST_ACTIVATION_RELU      ? (y[i] > 0 ? 1.0f : 0.0f)
                          : node.kind == DLHOST_ACTIVATION_SIGMOID ? y[i] * (1 - y[i])
                                                                   : 1 - y[i] * y[i]);
    } else if (node.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY && dx != nullptr) {
      softmax_cross_entropy(node, dx);
    } else if (node.op == DLHOST_OP_MSE_LOSS) {  // 2 (x - t) / n to x, its negation to t
      const float* t = value(node.in[1]);
      float* dt = grad(node.in[1]);
      const int64_t n = tensor(node.in[0]).count;
      const float scale = 2.0f * dy[0] / float(n);
      for (int64_t i = 0; i < n; ++i) {
        if (dx != nullptr) dx[i] += scale * (x[i] - t[i]);
        if (dt != nullptr) dt[i] -= scale * (x[i] - t[i]);
      }
    }
  }

  // Mean over rows of -log softmax(x)[label]; with `dx`, adds d loss * (softmax - onehot) / rows.
  double softmax_cross_entropy(const Node& node, float* dx) {
    const float* x = value(node.in[0]);
    const auto* labels = alias<int32_t>(tensor(node.in[1]).value);
    const int64_t rows = node.fc.rows, classes = node.fc.out;
    const double scale = dx != nullptr ? grad(node.out)[0] / double(rows) : 0.0;
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* z = x + r * classes;
      if (labels[r] < 0 || labels[r] >= classes)  // sticky: the next synchronize reports it
        throw std::out_of_range("label " + std::to_string(labels[r]) + " out of [0, " +
                                std::to_string(classes) + ")");
      const double top = *std::max_element(z, z + classes);
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[c] - top);
      total += std::log(sum) + top - z[labels[r]];
      for (int64_t c = 0; dx != nullptr && c < classes; ++c)
        dx[r * classes + c] +=
            float((std::exp(z[c] - top) / sum - (c == labels[r] ? 1.0 : 0.0)) * scale);
    }
    return total / double(rows);
  }

  Device& device_;
  dlhost_optimizer_desc opt_;
  int32_t loss_;
  std::vector<int32_t> inputs_;
  std::vector<Buffer> tensors_, params_;
  std::vector<Node> nodes_;
  uint64_t bytes_ = 0;
  std::string error_;   // the first failure of device work; sticky
  sim::Stream stream_;  // last: its worker stops (after draining) before the rest goes
};

class DeviceBackend final : public sdk::Backend<Device> {
 public:
  sdk::Device device(int32_t index) const override {
    sdk::Device d;
    d.kind = DLHOST_DEVICE_GPU;
    d.name = "sim" + std::to_string(index);
    d.model = "simulated device (dlhost/sim_device.hpp: a CPU stream, protected memory)";
    d.cores = 1;
    d.isa = "generic";
    d.memory_bytes = sim::kWindow;
    return d;
  }
  std::string library() const override { return "plain loops (example_device 1.0.0)"; }
  int32_t query() const override { return -200; }  // never the host's own choice
  std::optional<std::vector<sdk::OptionSpec>> options() const override { return sdk::no_options(); }
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities c;
    c.ops = {DLHOST_OP_INPUT, DLHOST_OP_FC, DLHOST_OP_ACTIVATION, DLHOST_OP_SOFTMAX_CROSS_ENTROPY,
             DLHOST_OP_MSE_LOSS};
    c.memory_spaces = sdk::bit(DLHOST_MEMORY_DEVICE);
    c.asynchronous = true;
    return c;
  }
  bool reads_tensors() const override { return true; }
  bool device_virtuals() const override { return true; }

  // Context-level device memory (buffers for the host's own use, e.g. gradient arenas).
  dlhost_buffer alloc_buffer(Device& d, uint64_t bytes, int32_t dtype) override {
    auto b = sdk::make_struct<dlhost_buffer>(DLHOST_BUFFER_STRUCT_SIZE);
    sdk::fill_buffer(&b, d.memory.allocate(bytes), bytes, dtype, DLHOST_MEMORY_DEVICE, d.index);
    return b;
  }
  void free_buffer(Device& d, const dlhost_buffer& b) override { d.memory.release(b.bytes); }
  // With no model: synchronous, as a copy on the device's default queue.
  void copy_to_host(Device& d, const dlhost_buffer& src, uint64_t offset, void* dst,
                    uint64_t bytes) override {
    std::memcpy(dst, alias<char>(checked(d, src, offset, bytes)), bytes);
  }
  void copy_from_host(Device& d, const void* src, const dlhost_buffer& dst, uint64_t offset,
                      uint64_t bytes) override {
    std::memcpy(alias<char>(checked(d, dst, offset, bytes)), src, bytes);
  }

  std::unique_ptr<Device> open(int32_t index, const sdk::Options&) override {
    auto d = std::make_unique<Device>();
    d->index = index;
    return d;
  }
  std::unique_ptr<sdk::Model> compile(Device& d, const dlhost_graph& graph,
                                      const dlhost_optimizer_desc& optimizer,
                                      const sdk::Options&) override {
    return std::make_unique<DeviceModel>(d, graph, optimizer);
  }

 private:
  static const char* checked(Device& d, const dlhost_buffer& b, uint64_t offset, uint64_t bytes) {
    if (offset > b.bytes || bytes > b.bytes - offset ||
        !d.memory.owns(static_cast<char*>(b.data) + offset, bytes))
      sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "example_device: copy outside a device buffer");
    return static_cast<char*>(b.data) + offset;
  }
};

}  // namespace device_example

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::backend_plugin<device_example::DeviceBackend>(
      host, {"example_device", "1.0.0",
             "example device backend: an MLP's ops on the SDK's simulated device (async stream, "
             "device memory, events)"});
}
