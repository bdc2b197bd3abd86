// program.h — a dlhost graph as MXNet sees it (lower.cpp): the arrays the model owns (leaves:
// inputs, trainable arrays, batch-norm running statistics, dropout masks and LSTM zero states)
// and the registered MXNet operators applied to them, in graph order. Both ways of running it
// read this one description: hybridized, as a Symbol composed from the calls and run by a
// CachedOp (Gluon's hybridize), or imperative, one MXImperativeInvoke per call (Gluon without
// hybridize); see executor.h.
//
// The ABI's parameters map onto trainable arrays one to one, except an LSTM: MXNet's fused RNN
// operator takes one packed vector per layer stack, whose slices (views sharing its memory) are
// the ABI's weight, weight_iter and bias; its second bias per layer (MXNet has two, the ABI one)
// is a slice of its own that stays zero (its gradient is cleared before every update).
// Thread-safety: built once by compile; then one host thread at a time, as the model.
#ifndef DLHOST_CPU_MXNET_PROGRAM_H
#define DLHOST_CPU_MXNET_PROGRAM_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/dlhost_graph.h"
#include "mxnet_library.h"

namespace dlhost::cpu_mxnet {

enum class LeafKind {
  kInput,      // a graph input the host feeds (I32 ids are held as F32: MXNet indexes by float)
  kTrainable,  // marked for autograd, with its gradient array
  kAux,        // mutated by its operator (batch-norm running statistics)
  kConstant    // filled by the backend (dropout masks each forward, LSTM zero states once)
};

struct Leaf {
  LeafKind kind;
  std::string name;  // the Variable's name in the Symbol
  std::vector<uint32_t> shape;
  NDArray value;
  NDArray grad;  // kTrainable only
  // kTrainable: element ranges [begin, end) that are no parameter of the ABI (an LSTM's second
  // bias): their gradient is zeroed before each update, so they stay at zero.
  std::vector<std::pair<uint32_t, uint32_t>> frozen;
};

// One MXNet operator applied to earlier values.
struct Call {
  std::string op;  // registered name: "Convolution"
  std::string name;
  std::vector<int> inputs;  // value ids, in the operator's argument order
  Attrs attrs;
  int32_t node;  // the graph node it lowers
};

// A value: a leaf or the (first) output of a call.
struct Value {
  bool is_leaf;
  int index;
};

// An ABI parameter: views of a trainable leaf in the canonical layout.
struct ParamView {
  int leaf;
  NDArray value, grad;
  size_t count;
};

struct DropoutMask {
  int leaf;
  uint32_t node;
  float probability;
};

struct Program {
  std::vector<Leaf> leaves;
  std::vector<Call> calls;
  std::vector<Value> values;
  std::vector<int> tensor_value;  // graph tensor id -> value id (-1: none)
  std::vector<int> input_leaf;    // graph tensor id -> leaf of a host-fed input (-1: none)
  std::vector<ParamView> params;  // by ABI parameter id
  std::vector<DropoutMask> masks;
  int loss = -1;                  // value id of the loss
  uint64_t activation_bytes = 0;  // every node output and its gradient, F32
  // Where the lowering is knowingly faster than Gluon's layers, one a line (ABI 1.5 model_info
  // departures; docs/frameworks.md).
  std::string departures;
};

// The program of `graph`; UNIMPLEMENTED naming the node for what MXNet cannot express.
std::unique_ptr<Program> lower_graph(const dlhost_graph& graph);

}  // namespace dlhost::cpu_mxnet

#endif  // DLHOST_CPU_MXNET_PROGRAM_H
