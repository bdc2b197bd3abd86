// op_visitor.hpp — a backend's lowering as one method per graph op: OpVisitor<Result, Node>::visit
// reads the node's attributes checked (node_attrs: present, struct_size at least the struct's
// first release, graph_access.hpp) and calls the method of the node's op with them. Every method
// refuses its op by default with UNIMPLEMENTED naming the op and the node (the host records the
// case SKIPPED with that reason, `dlhost conform` reports the problem UNIMPLEMENTED): a backend
// overrides the ops it lowers, and a new op of the ABI is one method with its typed attributes.
//
//   class Lowering final : public sdk::OpVisitor<Value> {   // Node: the dlhost_node itself
//     Value conv2d(const dlhost_node& n, const dlhost_conv2d_attrs& a) override { ... }
//     Value add(const dlhost_node& n) override { ... }
//   };
//   for (...) if (node.op != DLHOST_OP_INPUT) values[node.output] = lowering.visit(node);
//
// `Node` is what the methods get for the node: the dlhost_node by default, or the backend's own
// view of it (its index, its inputs' values, a name prefix), passed to visit(node, view).
// unsupported_op(node, why) refuses a variant of an op (an attribute value, a shape) in the same
// words. Header-only, compiled into the plugin; nothing here crosses the ABI. A visitor visits one
// node at a time (it keeps the node being visited for the defaults' message): one per thread.
#ifndef DLHOST_OP_VISITOR_HPP
#define DLHOST_OP_VISITOR_HPP

#include <string>
#include <type_traits>

#include "dlhost/graph_access.hpp"

namespace dlhost::sdk {

// UNIMPLEMENTED "<plugin>: <op> '<node>': <why>": an op, or a variant of it, the backend does not
// lower.
[[noreturn]] inline void unsupported_op(const dlhost_node& node, const std::string& why) {
  unimplemented(std::string(detail::plugin_name()) + ": " + op_name(node.op) + " '" +
                (node.name != nullptr ? node.name : "?") + "': " + why);
}

template <class Result, class Node = dlhost_node>
class OpVisitor {
 public:
  virtual ~OpVisitor() = default;

  // The method of `node`'s op, called with `at` and the node's checked attributes. An op outside
  // dlhost_graph.h's list (a newer host's) is UNIMPLEMENTED: "not an op this backend knows".
  Result visit(const dlhost_node& node, const Node& at) {
    visiting_ = &node;
    switch (node.op) {
      case DLHOST_OP_INPUT:
        return input(at);
      case DLHOST_OP_FC:
        return fc(at, node_attrs<dlhost_fc_attrs>(node));
      case DLHOST_OP_CONV2D:
        return conv2d(at, node_attrs<dlhost_conv2d_attrs>(node));
      case DLHOST_OP_POOL2D:
        return pool2d(at, node_attrs<dlhost_pool2d_attrs>(node));
      case DLHOST_OP_ACTIVATION:
        return activation(at, node_attrs<dlhost_activation_attrs>(node));
      case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
        return softmax_cross_entropy(at);
      case DLHOST_OP_MSE_LOSS:
        return mse_loss(at);
      case DLHOST_OP_BATCH_NORM:
        return batch_norm(at, node_attrs<dlhost_batch_norm_attrs>(node));
      case DLHOST_OP_DROPOUT:
        return dropout(at, node_attrs<dlhost_dropout_attrs>(node));
      case DLHOST_OP_ADD:
        return add(at);
      case DLHOST_OP_LRN:
        return lrn(at, node_attrs<dlhost_lrn_attrs>(node));
      case DLHOST_OP_EMBEDDING:
        return embedding(at, node_attrs<dlhost_embedding_attrs>(node));
      case DLHOST_OP_LSTM:
        return lstm(at, node_attrs<dlhost_lstm_attrs>(node));
      case DLHOST_OP_GLOBAL_AVG_POOL:
        return global_avg_pool(at);
      case DLHOST_OP_LAYER_NORM:
        return layer_norm(at, node_attrs<dlhost_layer_norm_attrs>(node));
      case DLHOST_OP_GELU:
        return gelu(at, node_attrs<dlhost_gelu_attrs>(node));
      case DLHOST_OP_ATTENTION:
        return attention(at, node_attrs<dlhost_attention_attrs>(node));
      case DLHOST_OP_POSITION_EMBEDDING:
        return position_embedding(at, node_attrs<dlhost_position_embedding_attrs>(node));
      case DLHOST_OP_TIED_FC:
        return tied_fc(at, node_attrs<dlhost_tied_fc_attrs>(node));
    }
    unsupported_op(node, "not an op this backend knows");
  }
  // The same, the methods getting the dlhost_node itself.
  template <class N = Node, class = std::enable_if_t<std::is_same_v<N, dlhost_node>>>
  Result visit(const dlhost_node& node) {
    return visit(node, node);
  }

 protected:
  // One method per op of dlhost_graph.h, in its order; the attributes are the op's struct.
  // INPUT: a lowering usually feeds the inputs itself and visits the other nodes.
  virtual Result input(const Node&) { refuse(); }
  virtual Result fc(const Node&, const dlhost_fc_attrs&) { refuse(); }
  virtual Result conv2d(const Node&, const dlhost_conv2d_attrs&) { refuse(); }
  virtual Result pool2d(const Node&, const dlhost_pool2d_attrs&) { refuse(); }
  virtual Result activation(const Node&, const dlhost_activation_attrs&) { refuse(); }
  virtual Result softmax_cross_entropy(const Node&) { refuse(); }
  virtual Result mse_loss(const Node&) { refuse(); }
  virtual Result batch_norm(const Node&, const dlhost_batch_norm_attrs&) { refuse(); }
  virtual Result dropout(const Node&, const dlhost_dropout_attrs&) { refuse(); }
  virtual Result add(const Node&) { refuse(); }
  virtual Result lrn(const Node&, const dlhost_lrn_attrs&) { refuse(); }
  virtual Result embedding(const Node&, const dlhost_embedding_attrs&) { refuse(); }
  virtual Result lstm(const Node&, const dlhost_lstm_attrs&) { refuse(); }
  virtual Result global_avg_pool(const Node&) { refuse(); }
  // ABI 1.4: the Transformer's ops.
  virtual Result layer_norm(const Node&, const dlhost_layer_norm_attrs&) { refuse(); }
  virtual Result gelu(const Node&, const dlhost_gelu_attrs&) { refuse(); }
  virtual Result attention(const Node&, const dlhost_attention_attrs&) { refuse(); }
  virtual Result position_embedding(const Node&, const dlhost_position_embedding_attrs&) {
    refuse();
  }
  virtual Result tied_fc(const Node&, const dlhost_tied_fc_attrs&) { refuse(); }

  // The node being visited (inside a method).
  const dlhost_node& visited() const { return *visiting_; }

 private:
  [[noreturn]] void refuse() const {
    unsupported_op(*visiting_, "not implemented by this backend");
  }

  const dlhost_node* visiting_ = nullptr;
};

}  // namespace dlhost::sdk

#endif  // DLHOST_OP_VISITOR_HPP
