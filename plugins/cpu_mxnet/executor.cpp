// executor.cpp — see executor.h: the Program as a composed Symbol (shape check, CachedOp) or as
// imperative operator calls, each forward under autograd recording.
#include "executor.h"

#include <map>
#include <string>
#include <vector>

#include "dlhost/common.hpp"

namespace dlhost::cpu_mxnet {
namespace {

namespace sdk = dlhost::sdk;

// Autograd recording in training mode for one scope (restored after, even on error).
class Recording {
 public:
  Recording() {
    check(mx().MXAutogradSetIsRecording(1, &was_recording_), "MXAutogradSetIsRecording");
    check(mx().MXAutogradSetIsTraining(1, &was_training_), "MXAutogradSetIsTraining");
  }
  ~Recording() {
    int ignored = 0;
    mx().MXAutogradSetIsRecording(was_recording_, &ignored);
    mx().MXAutogradSetIsTraining(was_training_, &ignored);
  }
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

 private:
  int was_recording_ = 0, was_training_ = 0;
};

std::vector<std::string> string_list(uint32_t count, const char** names) {
  return std::vector<std::string>(names, names + count);
}

// The Program as one Symbol: a Variable per leaf, each call an atomic symbol composed with its
// inputs' symbols.
struct Composed {
  std::vector<Symbol> values;  // by value id
  const Program& program;

  explicit Composed(const Program& p) : program(p) {
    values.resize(p.values.size());
    for (size_t v = 0; v < p.values.size(); ++v) {
      SymbolHandle h = nullptr;
      if (p.values[v].is_leaf) {
        check(mx().MXSymbolCreateVariable(p.leaves[size_t(p.values[v].index)].name.c_str(), &h),
              "MXSymbolCreateVariable");
        values[v] = Symbol(h);
        continue;
      }
      const Call& c = p.calls[size_t(p.values[v].index)];
      AttrArrays a(c.attrs);
      check(mx().MXSymbolCreateAtomicSymbol(op_handle(c.op), uint32_t(a.keys.size()), a.keys.data(),
                                            a.values.data(), &h),
            c.op.c_str());
      values[v] = Symbol(h);
      std::vector<SymbolHandle> args;
      for (int i : c.inputs) args.push_back(values[size_t(i)].get());
      check(mx().MXSymbolCompose(h, c.name.c_str(), uint32_t(args.size()), nullptr, args.data()),
            ("compose " + c.op).c_str());
    }
  }
  SymbolHandle loss() const { return values[size_t(program.loss)].get(); }

  // Names of the Symbol's inputs (arguments and auxiliary states), in MXNet's order.
  std::vector<std::string> input_names() const {
    nn_uint count = 0;
    const char** names = nullptr;
    check(mx().NNSymbolListInputNames(loss(), /*all=*/0, &count, &names), "NNSymbolListInputNames");
    return string_list(count, names);
  }
  int leaf_named(const std::string& name) const {
    for (size_t l = 0; l < program.leaves.size(); ++l)
      if (program.leaves[l].name == name) return int(l);
    sdk::fail(DLHOST_CODE_INTERNAL,
              "cpu_mxnet: the Symbol has an input '" + name + "' no leaf has");
  }

  // MXNet's shape inference from the leaves' shapes, against the graph's shape of every node.
  void check_shapes(const dlhost_graph& g) const {
    SymbolHandle internals_h = nullptr;
    check(mx().MXSymbolGetInternals(loss(), &internals_h), "MXSymbolGetInternals");
    const Symbol internals(internals_h);
    std::vector<const char*> keys;
    std::vector<uint32_t> offsets{0}, dims;
    const std::vector<std::string> inputs = input_names();
    for (const std::string& name : inputs) {
      // Only what the host feeds and the backend fills: MXNet infers the parameters' shapes
      // from its operators' attributes, so a difference shows at the node that makes it.
      const Leaf& l = program.leaves[size_t(leaf_named(name))];
      if (l.kind == LeafKind::kTrainable || l.kind == LeafKind::kAux) continue;
      keys.push_back(l.name.c_str());
      dims.insert(dims.end(), l.shape.begin(), l.shape.end());
      offsets.push_back(uint32_t(dims.size()));
    }
    uint32_t in_count = 0, out_count = 0, aux_count = 0;
    const uint32_t *in_ndim = nullptr, *out_ndim = nullptr, *aux_ndim = nullptr;
    const uint32_t **in_data = nullptr, **out_data = nullptr, **aux_data = nullptr;
    int complete = 0;
    check(
        mx().MXSymbolInferShape(internals.get(), uint32_t(keys.size()), keys.data(), offsets.data(),
                                dims.data(), &in_count, &in_ndim, &in_data, &out_count, &out_ndim,
                                &out_data, &aux_count, &aux_ndim, &aux_data, &complete),
        "MXSymbolInferShape");
    uint32_t name_count = 0;
    const char** names = nullptr;
    check(mx().MXSymbolListOutputs(internals.get(), &name_count, &names), "MXSymbolListOutputs");
    std::map<std::string, std::vector<uint32_t>> inferred;
    for (uint32_t i = 0; i < name_count && i < out_count; ++i)
      inferred[names[i]] = std::vector<uint32_t>(out_data[i], out_data[i] + out_ndim[i]);
    for (int32_t k = 0; k < g.num_nodes; ++k) {
      const dlhost_node& n = *g.nodes[k];
      const int v = program.tensor_value[size_t(n.output)];
      if (n.op == DLHOST_OP_INPUT || v < 0 || program.values[size_t(v)].is_leaf) continue;
      const Call& c = program.calls[size_t(program.values[size_t(v)].index)];
      const dlhost_tensor_desc& t = *g.tensors[n.output];
      std::vector<uint32_t> want(t.dims, t.dims + t.rank);
      if (want.empty()) want = {1};  // a scalar loss is MXNet's shape (1,)
      auto got = inferred.find(c.name + "_output");
      if (got == inferred.end() || got->second != want)
        sdk::unimplemented("cpu_mxnet: " + sdk::op_name(n.op) + " '" + n.name + "': MXNet's " +
                           c.op + " gives shape " + shape_text(got, inferred.end()) +
                           " where the graph has " + shape_text(want) + hint(c));
    }
  }
  static std::string hint(const Call& c) {
    if (c.op != "Pooling") return "";
    return " (MXNet's pooling_convention=full keeps a last window that starts in the padding; "
           "the ABI's ceil mode drops it, as Caffe and PyTorch do)";
  }
  static std::string shape_text(const std::vector<uint32_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  }
  template <class It>
  static std::string shape_text(It found, It end) {
    return found == end ? "(none)" : shape_text(found->second);
  }
};

// Gluon's hybridize(static_alloc=True, static_shape=True): one CachedOp over the whole Symbol,
// its memory planned once; parameters (and running statistics) are param_indices, the rest
// data_indices, as Gluon passes them.
class Hybridized final : public Executor {
 public:
  Hybridized(const Composed& symbol, Program& p) {
    std::string data = "[", params = "[";
    const std::vector<std::string> names = symbol.input_names();
    for (size_t i = 0; i < names.size(); ++i) {
      const Leaf& l = p.leaves[size_t(symbol.leaf_named(names[i]))];
      inputs_.push_back(l.value.get());
      const bool param = l.kind == LeafKind::kTrainable || l.kind == LeafKind::kAux;
      std::string& list = param ? params : data;
      list += (list.size() > 1 ? "," : "") + std::to_string(i);
    }
    const Attrs flags{{"static_alloc", "True"},
                      {"static_shape", "True"},
                      {"data_indices", data + "]"},
                      {"param_indices", params + "]"}};
    AttrArrays f(flags);
    check(mx().MXCreateCachedOpEx(symbol.loss(), int(f.keys.size()), f.keys.data(), f.values.data(),
                                  &op_),
          "MXCreateCachedOpEx");
  }
  ~Hybridized() override {
    loss_.reset();
    if (op_ != nullptr) mx().MXFreeCachedOp(op_);
  }

  NDArrayHandle forward() override {
    const Recording recording;
    int count = 0;
    NDArrayHandle* outputs = nullptr;
    check(mx().MXInvokeCachedOp(op_, int(inputs_.size()), inputs_.data(), &count, &outputs),
          "MXInvokeCachedOp");
    loss_.reset(outputs[0]);
    return loss_.get();
  }

 private:
  CachedOpHandle op_ = nullptr;
  std::vector<NDArrayHandle> inputs_;  // leaves in the Symbol's input order (borrowed)
  NDArray loss_;
};

// Gluon without hybridize: every call through MXImperativeInvoke, recorded by autograd.
class Imperative final : public Executor {
 public:
  explicit Imperative(const Program& p) : p_(p), outputs_(p.calls.size()) {
    for (const Call& c : p.calls) op_handle(c.op);  // every operator exists
  }
  NDArrayHandle forward() override {
    const Recording recording;
    for (size_t k = 0; k < p_.calls.size(); ++k) {
      const Call& c = p_.calls[k];
      std::vector<NDArrayHandle> in;
      for (int v : c.inputs) in.push_back(handle(v));
      std::vector<NDArray> out = invoke(c.op, in, c.attrs);
      outputs_[k] = std::move(out.at(0));
    }
    return handle(p_.loss);
  }

 private:
  NDArrayHandle handle(int value) const {
    const Value& v = p_.values[size_t(value)];
    return v.is_leaf ? p_.leaves[size_t(v.index)].value.get() : outputs_[size_t(v.index)].get();
  }
  const Program& p_;
  std::vector<NDArray> outputs_;  // by call, from the last forward
};

}  // namespace

std::unique_ptr<Executor> make_executor(const std::string& mode, const dlhost_graph& graph,
                                        Program& program) {
  const Composed symbol(program);
  symbol.check_shapes(graph);
  if (mode == "imperative") return std::make_unique<Imperative>(program);
  return std::make_unique<Hybridized>(symbol, program);
}

}  // namespace dlhost::cpu_mxnet
