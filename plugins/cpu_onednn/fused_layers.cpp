// fused_layers.cpp — the fused layers of cpu_onednn: each builds one span of the fusion plan
// (fusion_plan.h) as one object, in place of the plain layers of its nodes, and says in the plan
// what it applied, and what it declined and why. Two kinds:
//   ReluChainLayer  [conv | batch norm ->] ReLU [-> max pool]: the ReLU in its producer's
//                   primitive (conv+relu, bnorm+relu) and/or its backward in the pool's
//                   (relu+maxpool backward);
//   FcLossLayer     [FC] [-> softmax cross-entropy], under fused_step: SGD in the FC's backward
//                   (fc backward+sgd), the loss's gradient made in forward (xent gradient in
//                   forward) and its column sums handed to the FC as its bias gradient (xent
//                   column sums -> fc bias).
// The members are the plain layers of the other nodes (make_layer), asked for their part through
// the offers of layers.h; where one declines, it builds that part as it always does, so a
// declined fusion leaves the plain layers' steps. A chain's ReLU has no layer object of its own:
// the chain builds its steps (ActivationLayer's, add_eltwise_forward and add_eltwise_backward,
// where no member took them over). The model asks a fused layer for each
// node's steps at that node's place in the order (forward in order, backward in reverse), so
// what runs between, buffers, their reuse and peak memory are the plain layers'.
// Layers exist only while a model compiles, as in layers.cpp.
#include <memory>
#include <string>

#include "dlhost/common.hpp"
#include "fusion_plan.h"
#include "layers.h"
#include "model.h"

namespace dlhost::cpu_onednn {

namespace {

namespace sdk = dlhost::sdk;

// A node of a span built by its plain layer.
struct Member {
  std::unique_ptr<Layer> layer;
  int32_t node = -1;
};

Member member(const dlhost_graph* g, int32_t n) { return {make_layer(g, n), n}; }

std::string node_name(const dlhost_graph* g, int32_t n) {
  const dlhost_node& node = *g->nodes[n];
  return node.name != nullptr ? std::string(node.name) : "node" + std::to_string(n);
}

// The offer `Offer` (layers.h) of a member's plain layer.
template <class Offer>
Offer* offer_of(const dlhost_graph* g, const Member& m, const char* offer) {
  auto* o = dynamic_cast<Offer*>(m.layer.get());
  if (o == nullptr)
    sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: node " + node_name(g, m.node) +
                                        " is in a fused span but its layer offers no " + offer);
  return o;
}

[[noreturn]] void bad_span(const dlhost_graph* g, const FusedSpan& span) {
  std::string nodes;
  for (int32_t n : span.nodes) nodes += (nodes.empty() ? "" : "+") + node_name(g, n);
  sdk::fail(DLHOST_CODE_INTERNAL,
            "cpu_onednn: the fusion plan's span " + nodes + " is no fused layer's");
}

[[noreturn]] void not_in_span(int32_t node) {
  sdk::fail(DLHOST_CODE_INTERNAL,
            "cpu_onednn: a fused layer asked for node " + std::to_string(node) + ", not its own");
}

// [conv | batch norm ->] ReLU [-> max pool]: the ReLU node, with the node before it (the head:
// the ReLU its output's one reader) and the max pool behind it (the ReLU's output's one reader)
// where the plan fuses them. Forward: the head's primitive applies the ReLU where oneDNN keeps
// its kernel (ConvLayer's and BatchNormLayer's comments), and the ReLU's output then takes the
// head output's bytes; else the ReLU's own eltwise step. Backward: the pool masks its gradient
// and writes the ReLU input's (PoolLayer's comment), else the ReLU's own backward: handed over
// where batch norm's workspace masks it, the eltwise backward otherwise.
class ReluChainLayer final : public FusedLayer {
 public:
  ReluChainLayer(const dlhost_graph* g, const FusedSpan& span) {
    const bool head = span.has(FusionKind::kConvRelu) || span.has(FusionKind::kBatchNormRelu);
    const bool pool = span.has(FusionKind::kReluMaxPoolBackward);
    if (span.nodes.size() != 1u + head + pool) bad_span(g, span);
    size_t i = 0;
    if (head) {
      head_ = member(g, span.nodes[i++]);
      head_offer_ = offer_of<ReluHead>(g, head_, "ReLU head");
      head_kind_ =
          span.has(FusionKind::kConvRelu) ? FusionKind::kConvRelu : FusionKind::kBatchNormRelu;
    }
    relu_ = span.nodes[i++];
    const dlhost_node& relu = *g->nodes[relu_];
    name_ = node_name(g, relu_);
    input_ = relu.inputs[0];  // the planner's ReLU has one input
    output_ = relu.output;
    if (pool) {
      pool_ = member(g, span.nodes[i]);
      pool_offer_ = offer_of<ReluMaskingPool>(g, pool_, "ReLU-masking pool");
    }
  }

  void build_forward(Model& m, Steps& steps, int32_t node) override {
    if (node == head_.node) {
      const std::string why_not = head_offer_->build_forward_with_relu(m, steps);
      m.plan().resolve(head_kind_, head_.node, why_not);
      relu_in_head_ = why_not.empty();
    } else if (node == relu_) {
      Tensor& x = m.tensor(input_);
      Tensor& y = m.tensor(output_);
      // ActivationLayer's checks.
      if (x.dtype != DLHOST_DTYPE_F32) bad("input " + x.name + " is not F32");
      if (!x.value) bad("input " + x.name + " is not computed before this node");
      if (y.dims != x.dims) bad("output " + dims_str(y.dims) + " differs from input");
      // The head applied the ReLU, and the plan made this node its output's one reader: those
      // bytes are this node's output.
      if (relu_in_head_)
        m.write_over(x, y, name_);
      else
        add_eltwise_forward(m, steps, kRelu, name_, x, y);
    } else if (node == pool_.node) {
      pool_.layer->build_forward(m, steps);
    } else {
      not_in_span(node);
    }
  }

  void build_backward(Model& m, Steps& steps, int32_t node) override {
    Tensor& x = m.tensor(input_);
    if (node == pool_.node) {
      // Where no gradient flows through the ReLU the pool builds no backward, and the planned
      // relu+maxpool backward stays open: FusionPlan::finish declines it saying so.
      if (!x.needs_grad) return;
      const std::string why_not = pool_offer_->build_backward_through_relu(m, steps, x);
      m.plan().resolve(FusionKind::kReluMaxPoolBackward, pool_.node, why_not);
      relu_in_pool_ = why_not.empty();
    } else if (node == relu_) {
      if (!x.needs_grad || relu_in_pool_) return;
      Tensor& y = m.tensor(output_);
      if (relu_in_head_ && head_offer_->masks_relu_gradient())
        m.hand_over_diff(y, x, steps, name_ + ": eltwise backward: gradient to the batch norm");
      else
        add_eltwise_backward(m, steps, kRelu, name_, x, y);
    } else if (node == head_.node) {
      head_.layer->build_backward(m, steps);
    } else {
      not_in_span(node);
    }
  }

 private:
  // The use_dst form: backward reads the output, so the input need not be kept.
  static constexpr dnnl::algorithm kRelu = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;

  [[noreturn]] void bad(const std::string& why) const {
    sdk::invalid("cpu_onednn: node " + name_ + ": " + why);
  }

  Member head_, pool_;  // node -1 where the span has none
  ReluHead* head_offer_ = nullptr;
  ReluMaskingPool* pool_offer_ = nullptr;
  FusionKind head_kind_ = FusionKind::kConvRelu;
  int32_t relu_ = -1, input_ = -1, output_ = -1;  // the ReLU's node and tensors
  std::string name_;                              // the ReLU's
  bool relu_in_head_ = false;                     // the head's primitive applies the ReLU
  bool relu_in_pool_ = false;                     // the pool's backward does the ReLU's
};

// [FC] [-> softmax cross-entropy] under fused_step: the FC whose weight-gradient GEMM applies
// SGD (fc_layer.cpp's GemmWithSgd), the loss that makes the logits' gradient in forward
// (SoftmaxCrossEntropyLayer's comment) and, with both, the loss's column sums of that gradient
// as the FC's bias gradient instead of a pass over it. Each where the other's form allows it:
// the column sums need the GEMM strategy and the gradient made in forward.
class FcLossLayer final : public FusedLayer {
 public:
  FcLossLayer(const dlhost_graph* g, const FusedSpan& span) : span_(span) {
    for (int32_t n : span.nodes) {
      const int32_t op = g->nodes[n]->op;
      Member& slot = op == DLHOST_OP_FC ? fc_ : loss_;
      if ((op != DLHOST_OP_FC && op != DLHOST_OP_SOFTMAX_CROSS_ENTROPY) || slot.layer)
        bad_span(g, span);
      slot = member(g, n);
    }
    if (fc_.layer) fc_offer_ = offer_of<FcGradients>(g, fc_, "FC gradients");
    if (loss_.layer) loss_offer_ = offer_of<LossGradientInForward>(g, loss_, "gradient in forward");
    // The planner adds the column sums with the gradient in forward, and a loss only with them.
    if ((span.has(FusionKind::kLossBiasColumnSums) && !(fc_.layer && loss_.layer)) ||
        (loss_.layer && !span.has(FusionKind::kLossGradientInForward)))
      bad_span(g, span);
  }

  void build_forward(Model& m, Steps& steps, int32_t node) override {
    if (node == fc_.node) {
      if (span_.has(FusionKind::kFcSgdUpdate)) fc_offer_->offer_sgd();
      fc_.layer->build_forward(m, steps);
      const std::string why_not = fc_offer_->gemm_declined();
      if (span_.has(FusionKind::kFcSgdUpdate))
        m.plan().resolve(FusionKind::kFcSgdUpdate, fc_.node, why_not);
      if (!why_not.empty()) decline_column_sums(m, why_not);
    } else if (node == loss_.node) {
      loss_offer_->offer_gradient_in_forward();
      loss_.layer->build_forward(m, steps);
      const std::string why_not = loss_offer_->gradient_in_forward_declined();
      m.plan().resolve(FusionKind::kLossGradientInForward, loss_.node, why_not);
      // No gradient in forward, no column sums: this reason wins over the FC's, as the sums
      // come from the loss's form.
      if (!why_not.empty()) decline_column_sums(m, why_not);
    } else {
      not_in_span(node);
    }
  }

  void build_backward(Model& m, Steps& steps, int32_t node) override {
    if (node == loss_.node) {
      loss_.layer->build_backward(m, steps);
    } else if (node == fc_.node) {
      if (span_.has(FusionKind::kLossBiasColumnSums) && !sums_declined_) {
        const float* sums = loss_offer_->column_sums();
        m.plan().resolve(FusionKind::kLossBiasColumnSums, fc_.node,
                         sums != nullptr ? "" : "the loss made no column sums");
        if (sums != nullptr) fc_offer_->take_bias_gradient(sums);
      }
      fc_.layer->build_backward(m, steps);
    } else {
      not_in_span(node);
    }
  }

 private:
  void decline_column_sums(Model& m, const std::string& why) {
    if (!span_.has(FusionKind::kLossBiasColumnSums)) return;
    m.plan().resolve(FusionKind::kLossBiasColumnSums, fc_.node, why);
    sums_declined_ = true;
  }

  FusedSpan span_;
  Member fc_, loss_;  // node -1 where the span has none
  FcGradients* fc_offer_ = nullptr;
  LossGradientInForward* loss_offer_ = nullptr;
  bool sums_declined_ = false;
};

}  // namespace

std::unique_ptr<FusedLayer> make_fused_layer(const dlhost_graph* graph, const FusedSpan& span) {
  if (span.has(FusionKind::kConvRelu) || span.has(FusionKind::kBatchNormRelu) ||
      span.has(FusionKind::kReluMaxPoolBackward))
    return std::make_unique<ReluChainLayer>(graph, span);
  return std::make_unique<FcLossLayer>(graph, span);
}

}  // namespace dlhost::cpu_onednn
