// framework_kit.hpp — the ABI glue a backend over a framework (TensorFlow, MXNet, libtorch: a
// library with its own tensors, autograd and optimizer) writes again otherwise, so that the
// backend is its lowering and the framework's calls:
// - HostSettings: the host-set options (threads, seed, precision, fused_step) read once, typed,
//   and FrameworkBackend<Context>, a Backend that hands them to open_context/compile_graph and
//   refuses at compile an optimizer kind or a precision its capabilities lack (the backend kit
//   refuses the precision at context_create already; compile keeps the refusal for a host that
//   skips that) and negative optimizer settings;
// - ParamTable: the graph's parameters as the ABI's calls name them: the id bounds, the size and
//   the part of read_param/write_param checked, and the grad-ready order (layers last to first,
//   each node's own parameters in its order; a tied table, which two nodes list, is ready once,
//   at the node that owns it); GradReadyNotices sends the notices in that order as parameters
//   become final;
// - IdInputs: the I32 inputs whose ids a consumer bounds (a cross-entropy's labels below its
//   classes, an embedding's token ids below its vocabulary), checked at set_input;
// - DropoutMask: the ABI's mask (dlhost_dropout_keep, scaled by 1/(1-p)) of a node at a step;
// - expect_bytes: "takes N bytes, got M" for set_input and the parameter calls.
// Every refusal names the plugin (PluginInfo::name) and is the message the framework backends'
// tests check. Header-only, compiled into the plugin; nothing crosses the ABI. A model's pieces
// are used from one host thread at a time (the ABI's rule); the free functions are thread-safe.
#ifndef DLHOST_FRAMEWORK_KIT_HPP
#define DLHOST_FRAMEWORK_KIT_HPP

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "dlhost/backend_kit.hpp"
#include "dlhost/graph_access.hpp"

namespace dlhost::sdk {

// A dlhost_optimizer_kind as suites spell it ("sgd", "adamw"); "unknown" for another value.
inline const char* optimizer_name(int32_t kind) {
  static const char* const names[] = {"sgd", "adamw"};  // from DLHOST_OPTIMIZER_SGD on
  return kind >= DLHOST_OPTIMIZER_SGD && kind <= DLHOST_OPTIMIZER_ADAMW
             ? names[kind - DLHOST_OPTIMIZER_SGD]
             : "unknown";
}

// The options the host sets on every case (not declared in a plugin's schema), typed.
struct HostSettings {
  int32_t threads = 0;             // "threads": 0 is the library's default (every core)
  int64_t seed = 42;               // "seed": dropout's mask; 42 is the runner's default
  std::string precision = "fp32";  // "precision": fp32, tf32, bf16, fp16
  bool fused_step = false;         // "fused_step" (ABI 1.4, compile only): "1" allows the fusion
};

// The host-set options of `options`, each absent one as in `fallback` (compile falls back on the
// context's). A threads value outside [0, kMaxThreads] or a non-integer seed is INVALID_ARGUMENT
// naming the key.
inline HostSettings host_settings(const Options& options, const HostSettings& fallback = {}) {
  HostSettings s;
  s.threads = static_cast<int32_t>(options.get_int_in("threads", fallback.threads, 0, kMaxThreads));
  s.seed = options.get_int("seed", fallback.seed);
  s.precision = options.get("precision").value_or(fallback.precision);
  const auto fused = options.get("fused_step");
  s.fused_step = fused ? *fused == "1" : fallback.fused_step;
  return s;
}

// What the compile of a backend with `caps` refuses before its own work: a precision it lacks
// (UNIMPLEMENTED: the host records the case SKIPPED), an optimizer kind it lacks (UNIMPLEMENTED,
// naming the kind), negative momentum, weight decay or clip norm (INVALID_ARGUMENT).
inline void check_compile(const Capabilities& caps, const HostSettings& host,
                          const dlhost_optimizer_desc& optimizer) {
  const std::string who = std::string(detail::plugin_name()) + ": ";
  const int32_t p = precision_of(host.precision);
  if (p == 0 || !(caps.precisions & bit(p)))
    unimplemented(who + "precision " + host.precision + " is not implemented");
  const bool known = optimizer.kind >= 0 && optimizer.kind < 32;
  if (!known || !(caps.optimizers & bit(optimizer.kind)))
    unimplemented(who + "optimizer kind " + std::to_string(optimizer.kind) + " (" +
                  optimizer_name(optimizer.kind) + ") not supported");
  if (optimizer.momentum < 0 || optimizer.clip_norm < 0 || optimizer.weight_decay < 0)
    invalid(who + "negative momentum, weight_decay or clip_norm");
}

// What every context of a framework backend carries: the host settings it was opened with (the
// kit sets them after open_context), the fallback of each compile's.
struct FrameworkContext {
  HostSettings host;
};

// A backend over a framework. The author writes open_context and compile_graph (and
// capabilities(): the kit refuses at compile what they lack) instead of Backend's open and
// compile; ContextT derives from FrameworkContext.
template <class ContextT>
class FrameworkBackend : public Backend<ContextT> {
  static_assert(std::is_base_of_v<FrameworkContext, ContextT>,
                "a framework backend's context derives from sdk::FrameworkContext");

 public:
  // `host` is what the context's options set; `options` holds the backend's own.
  virtual std::unique_ptr<ContextT> open_context(int32_t device, const HostSettings& host,
                                                 const Options& options) = 0;
  // The precision and the optimizer are already checked (check_compile); `host` is the compile
  // options' settings over the context's.
  virtual std::unique_ptr<Model> compile_graph(ContextT& context, const dlhost_graph& graph,
                                               const dlhost_optimizer_desc& optimizer,
                                               const HostSettings& host,
                                               const Options& options) = 0;

  std::unique_ptr<ContextT> open(int32_t device, const Options& options) final {
    const HostSettings host = host_settings(options);
    std::unique_ptr<ContextT> context = open_context(device, host, options);
    if (context) context->host = host;
    return context;
  }
  std::unique_ptr<Model> compile(ContextT& context, const dlhost_graph& graph,
                                 const dlhost_optimizer_desc& optimizer,
                                 const Options& options) final {
    const HostSettings host = host_settings(options, context.host);
    check_compile(this->capabilities().value_or(Capabilities{}), host, optimizer);
    return compile_graph(context, graph, optimizer, host, options);
  }
};

// "<plugin>: <what> takes <want> bytes, got <bytes>" (INVALID_ARGUMENT) unless the data pointer
// is `given` (not NULL) and `bytes` is exactly `want`. A flag, not the pointer: the caller's
// buffer may be one still to be filled, which a compiler would warn about reading.
inline void expect_bytes(const std::string& what, bool given, size_t bytes, size_t want) {
  if (!given || bytes != want)
    invalid(std::string(detail::plugin_name()) + ": " + what + " takes " + std::to_string(want) +
            " bytes, got " + (given ? std::to_string(bytes) : std::string("NULL")));
}

// `id` as an index into a model's `count` parameters; INVALID_ARGUMENT "no parameter <id>" outside.
inline size_t param_index(int32_t id, size_t count) {
  if (id < 0 || static_cast<size_t>(id) >= count)
    invalid(std::string(detail::plugin_name()) + ": no parameter " + std::to_string(id) +
            " (the graph has " + std::to_string(count) + ")");
  return static_cast<size_t>(id);
}

// read_param/write_param's part: DLHOST_PARAM_VALUE or DLHOST_PARAM_GRAD, else INVALID_ARGUMENT.
inline void expect_param_part(int32_t part) {
  if (part != DLHOST_PARAM_VALUE && part != DLHOST_PARAM_GRAD)
    invalid(std::string(detail::plugin_name()) + ": unknown parameter part " +
            std::to_string(part));
}

// The parameters of the graph a model compiled, as the ABI's parameter calls name them.
class ParamTable {
 public:
  explicit ParamTable(const dlhost_graph& graph) {
    for (int32_t p = 0; p < graph.num_params; ++p) counts_.push_back(graph.params[p]->count);
    for (int32_t k = graph.num_nodes - 1; k >= 0; --k) {
      const dlhost_node& n = *graph.nodes[k];
      for (int32_t i = 0; i < n.num_params; ++i)
        if (graph.params[n.params[i]]->node == k) ready_order_.push_back(n.params[i]);
    }
  }
  size_t size() const { return counts_.size(); }
  // The index of parameter `id`; INVALID_ARGUMENT "no parameter <id>" outside the graph's.
  size_t index(int32_t id) const { return param_index(id, counts_.size()); }
  int64_t count(int32_t id) const { return counts_[index(id)]; }
  // read_param/write_param's arguments checked (the id, then `data` and exactly the F32 bytes of
  // the parameter, then the part); the index.
  size_t access(int32_t id, int32_t part, const void* data, size_t bytes) const {
    const size_t p = index(id);
    expect_bytes("parameter " + std::to_string(id), data != nullptr, bytes,
                 static_cast<size_t>(counts_[p]) * sizeof(float));
    expect_param_part(part);
    return p;
  }
  // Parameter ids in the ABI's grad-ready order (see the top of this file).
  const std::vector<int32_t>& ready_order() const { return ready_order_; }

 private:
  std::vector<int64_t> counts_;
  std::vector<int32_t> ready_order_;
};

// The grad-ready notices of one backward, in `order` (ParamTable::ready_order), each as soon as
// every parameter before it in that order is final: a framework's autograd finishes parameters in
// the order of its own queue. begin() at the start of backward, final(p) when p's gradient is
// final (on the thread that runs backward), finish() at its end (every parameter not yet final is
// then: all of them for a backend that learns nothing during backward).
class GradReadyNotices {
 public:
  GradReadyNotices() = default;
  explicit GradReadyNotices(std::vector<int32_t> order) { expect(std::move(order)); }
  void expect(std::vector<int32_t> order) {
    order_ = std::move(order);
    size_t n = 0;
    for (int32_t p : order_) n = std::max(n, static_cast<size_t>(p) + 1);
    final_.assign(n, false);
  }
  void begin(const dlhost_grad_ready* ready) {
    ready_ = ready != nullptr && ready->fn != nullptr ? ready : nullptr;
    std::fill(final_.begin(), final_.end(), false);
    next_ = 0;
  }
  // True when the host listens (a backend may skip waiting for gradients otherwise).
  bool listening() const { return ready_ != nullptr; }
  void final(int32_t param) {
    if (param < 0 || static_cast<size_t>(param) >= final_.size()) return;
    final_[static_cast<size_t>(param)] = true;
    for (; next_ < order_.size() && final_[static_cast<size_t>(order_[next_])]; ++next_)
      if (ready_ != nullptr) ready_->fn(ready_->user, order_[next_]);
  }
  void finish() {
    for (int32_t p : order_) final(p);
    ready_ = nullptr;
  }

 private:
  std::vector<int32_t> order_;
  std::vector<bool> final_;
  size_t next_ = 0;
  const dlhost_grad_ready* ready_ = nullptr;
};

// The graph's I32 inputs and the bound a consumer puts on their ids: a cross-entropy's labels
// lie in [0, classes), an embedding's token ids in [0, vocab). An input two consumers bound takes
// the smaller bound; an input none bounds is unchecked.
class IdInputs {
 public:
  explicit IdInputs(const dlhost_graph& graph) {
    for (int32_t k = 0; k < graph.num_inputs; ++k) {
      const dlhost_tensor_desc& d = *graph.tensors[graph.inputs[k]];
      if (d.dtype == DLHOST_DTYPE_I32)
        inputs_.push_back(
            {d.id, 0, "input '" + std::string(d.name != nullptr ? d.name : "?") + "'"});
    }
    for (int32_t k = 0; k < graph.num_nodes; ++k) {
      const dlhost_node& n = *graph.nodes[k];
      bool known = n.inputs != nullptr;  // a malformed node is the lowering's to refuse
      for (int32_t i = 0; known && i < n.num_inputs; ++i)
        known = n.inputs[i] >= 0 && n.inputs[i] < graph.num_tensors;
      if (!known) continue;
      if (n.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY && n.num_inputs == 2) {
        const dlhost_tensor_desc& logits = *graph.tensors[n.inputs[0]];
        if (logits.rank > 0) bound(n.inputs[1], logits.dims[logits.rank - 1]);
      } else if (n.op == DLHOST_OP_EMBEDDING && n.num_inputs >= 1) {
        bound(n.inputs[0], node_attrs<dlhost_embedding_attrs>(n).vocab);
      }
    }
  }
  // True when `tensor` is an I32 input of the graph.
  bool holds(int32_t tensor) const { return find(tensor) != nullptr; }
  // The exclusive bound of `tensor`'s ids (0: unchecked, or not an I32 input).
  int64_t limit(int32_t tensor) const {
    const Input* in = find(tensor);
    return in != nullptr ? in->limit : 0;
  }
  // INVALID_ARGUMENT "<plugin>: input 'labels': id 3 at position 1 is outside [0, 3)" for the
  // first id of `count` outside its bound; nothing for a tensor that is not a bounded I32 input.
  void check(int32_t tensor, const int32_t* ids, size_t count) const {
    const Input* in = find(tensor);
    if (in == nullptr || in->limit <= 0) return;
    for (size_t i = 0; i < count; ++i)
      if (ids[i] < 0 || ids[i] >= in->limit)
        invalid(std::string(detail::plugin_name()) + ": " + in->what + ": id " +
                std::to_string(ids[i]) + " at position " + std::to_string(i) + " is outside [0, " +
                std::to_string(in->limit) + ")");
  }

 private:
  struct Input {
    int32_t tensor;
    int64_t limit;
    std::string what;
  };
  const Input* find(int32_t tensor) const {
    for (const Input& in : inputs_)
      if (in.tensor == tensor) return &in;
    return nullptr;
  }
  void bound(int32_t tensor, int64_t limit) {
    for (Input& in : inputs_)
      if (in.tensor == tensor && limit > 0 && (in.limit == 0 || limit < in.limit)) in.limit = limit;
  }
  std::vector<Input> inputs_;
};

// The ABI's dropout mask (dlhost_graph.h) of `node` in the forward after `step` earlier ones:
// element i is 1/(1-p) where dlhost_dropout_keep(seed, node, step, i, p) keeps it, else 0, in the
// canonical layout. The same on every backend, so results compare.
struct DropoutMask {
  uint64_t seed;
  uint32_t node;
  uint64_t step;
  float probability;

  float at(uint64_t i) const {
    return dlhost_dropout_keep(seed, node, step, i, probability) ? 1.0f / (1.0f - probability)
                                                                 : 0.0f;
  }
  // mask[i] for i in [begin, end) (a backend may split the range over threads).
  void fill(float* mask, uint64_t begin, uint64_t end) const {
    const float kept = 1.0f / (1.0f - probability);
    for (uint64_t i = begin; i < end; ++i)
      mask[i] = dlhost_dropout_keep(seed, node, step, i, probability) ? kept : 0.0f;
  }
  void fill(float* mask, uint64_t count) const { fill(mask, 0, count); }
};

}  // namespace dlhost::sdk

#endif  // DLHOST_FRAMEWORK_KIT_HPP
