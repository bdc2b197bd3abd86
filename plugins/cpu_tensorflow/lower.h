// lower.h — the host's graph as a TensorFlow graph (lower.cpp): every parameter a resource
// variable read once per run, every input a placeholder, images channels-last (NHWC, Keras's
// layout on CPU) from the input on, the ops Keras's layers use, and the backward added to the
// same graph by TF_AddGradients (TensorFlow's C++ gradient registry). The optimizer's ops are
// added by optimizer.cpp, the session and the step calls are model.cpp's.
// Thread-safety: built once by compile, on the calling thread.
#ifndef DLHOST_CPU_TENSORFLOW_LOWER_H
#define DLHOST_CPU_TENSORFLOW_LOWER_H

#include <cstdint>
#include <string>
#include <vector>

#include "dlhost/dlhost_graph.h"
#include "tf_api.h"

namespace dlhost::cpu_tensorflow {

// How an array in the ABI's canonical layout becomes TensorFlow's: reshaped to `view`, then
// transposed by `perm` (TensorFlow's axis k is view axis perm[k]). Empty `perm`: the same order.
struct Layout {
  std::vector<int64_t> view;
  std::vector<int> perm;
  // canonical -> TensorFlow and back; `count` elements each.
  void to_tf(const float* canonical, float* tf) const;
  void to_canonical(const float* tf, float* canonical) const;
  bool identity() const { return perm.empty(); }
};

// A parameter as a resource variable.
struct Variable {
  std::string name;
  std::vector<int64_t> dims;       // TensorFlow's shape
  int64_t count = 0;               // elements
  Layout layout;                   // canonical <-> TensorFlow
  TF_Operation* handle = nullptr;  // VarHandleOp
  TF_Output read{};                // ReadVariableOp the forward uses (and read_param fetches)
  TF_Output value{};               // placeholder write_param feeds
  TF_Operation* assign = nullptr;  // AssignVariableOp(handle, value)
};

// A tensor the host feeds (graph.inputs).
struct InputFeed {
  int32_t tensor = -1;
  TF_Output placeholder{};
  TF_DataType dtype = TF_FLOAT;
  std::vector<int64_t> dims;  // TensorFlow's shape
  int64_t count = 0;
  Layout layout;     // an image NCHW -> NHWC
  std::string what;  // "input 'labels'", for errors
};

// The pinned dropout mask of one node, filled by the plugin before each forward.
struct DropoutFeed {
  uint32_t node = 0;
  float probability = 0;
  TF_Output placeholder{};
  std::vector<int64_t> dims;  // TensorFlow's shape
  Layout layout;              // the ABI indexes the mask canonically
};

struct Lowered {
  std::vector<InputFeed> inputs;
  std::vector<DropoutFeed> dropouts;
  std::vector<Variable> params;              // by parameter id
  TF_Output loss{};                          // scalar
  std::vector<TF_Output> grads;              // d loss / d params[k].read, TensorFlow's layout
  std::vector<TF_Operation*> state_updates;  // batch norms' running statistics
  std::vector<TF_Operation*> initializers;   // set every variable (parameters zero)
  std::vector<std::string> notes;            // how each kind of op was lowered, for the record
  // Where the lowering is knowingly faster than Keras's layers (ABI 1.5 model_info departures).
  std::vector<std::string> departures;
};

// Lowers `graph` into `g`; UNIMPLEMENTED naming the node when TensorFlow cannot express it.
Lowered lower_graph(TF_Graph* g, const dlhost_graph& graph);

// Helpers shared with optimizer.cpp.
TF_Output scalar_const(TF_Graph* g, const std::string& name, float v);
TF_Output ints_const(TF_Graph* g, const std::string& name, const std::vector<int32_t>& v);
// A resource variable `name` of `dims`, set to `value` by an op appended to `initializers`.
TF_Operation* make_variable(TF_Graph* g, const std::string& name, const std::vector<int64_t>& dims,
                            float value, std::vector<TF_Operation*>& initializers);

}  // namespace dlhost::cpu_tensorflow

#endif  // DLHOST_CPU_TENSORFLOW_LOWER_H
