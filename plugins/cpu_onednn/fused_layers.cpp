// fused_layers.cpp — the fused layers of cpu_onednn: each builds one span of the fusion plan
// (fusion_plan.h) as one Layer, in place of the plain layers of its nodes, and says in the plan
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
// declined fusion leaves the plain layers' steps. A chain's ReLU has no layer of its own: the
// chain is that node's layer and builds its steps (ActivationLayer's, add_eltwise_forward and
// add_eltwise_backward, where no member took them over). Every member keeps its place in the
// node order (forward in order, backward in reverse, with Model::end_node_backward between the
// nodes), so buffers, their reuse and peak memory are the plain layers'.
// Layers exist only while a model compiles, as in layers.cpp.
#include <functional>
#include <memory>
#include <string>

#include "dlhost/common.hpp"
#include "fusion_plan.h"
#include "layers.h"
#include "model.h"

namespace dlhost::cpu_onednn {

namespace {

namespace sdk = dlhost::sdk;

std::string node_name(const dlhost_graph* g, int32_t n) {
  const dlhost_node& node = *g->nodes[n];
  return node.name != nullptr ? std::string(node.name) : "node" + std::to_string(n);
}

// A node of a span built by its plain layer.
struct Member {
  std::unique_ptr<Layer> layer;
  int32_t node = -1;
  std::string name;

  // Runs `body` with oneDNN's errors named after this node, as the model names a plain layer's.
  void build(const std::function<void()>& body) const { with_dnnl("node " + name, body); }
};

Member member(const dlhost_graph* g, int32_t n) { return {make_layer(g, n), n, node_name(g, n)}; }

// The offer `Offer` (layers.h) of a member's plain layer.
template <class Offer>
Offer* offer_of(const Member& m, const char* offer) {
  auto* o = dynamic_cast<Offer*>(m.layer.get());
  if (o == nullptr)
    sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: node " + m.name +
                                        " is in a fused span but its layer offers no " + offer);
  return o;
}

[[noreturn]] void bad_span(const dlhost_graph* g, const FusedSpan& span) {
  sdk::fail(DLHOST_CODE_INTERNAL, "cpu_onednn: the fusion plan's span " + node_name(g, span.first) +
                                      ".." + node_name(g, span.last) + " is no fused layer's");
}

// [conv | batch norm ->] ReLU [-> max pool]: the ReLU node's layer, with the node before it
// (the head: the ReLU its output's one reader) and the max pool behind it (the ReLU's output's
// one reader) where the plan fuses them. Forward: the head's primitive applies the ReLU where
// oneDNN keeps its kernel (ConvLayer's and BatchNormLayer's comments), and the ReLU's output
// then takes the head output's bytes; else the ReLU's own eltwise step. Backward: the pool
// masks its gradient and writes the ReLU input's (PoolLayer's comment), else the ReLU's own
// backward: handed over where batch norm's workspace masks it, the eltwise backward otherwise.
class ReluChainLayer final : public NodeLayer {
 public:
  ReluChainLayer(const dlhost_graph* g, const FusedSpan& span)
      : NodeLayer(g, *g->nodes[relu_node(span)]) {
    if (index_ > span.first) {
      head_ = member(g, span.first);
      head_offer_ = offer_of<ReluHead>(head_, "ReLU head");
      head_kind_ =
          span.has(FusionKind::kConvRelu) ? FusionKind::kConvRelu : FusionKind::kBatchNormRelu;
    }
    if (span.has(FusionKind::kReluMaxPoolBackward)) {
      pool_ = member(g, index_ + 1);
      pool_offer_ = offer_of<ReluMaskingPool>(pool_, "ReLU-masking pool");
    }
    if ((pool_.layer ? pool_.node : index_) != span.last) bad_span(g, span);
  }

  void build_forward(Model& m, Steps& steps) override {
    if (head_.layer) {
      std::string why_not;
      head_.build([&] { why_not = head_offer_->build_forward_with_relu(m, steps); });
      m.plan().resolve(head_kind_, head_.node, why_not);
      relu_in_head_ = why_not.empty();
    }
    with_dnnl("node " + name_, [&] {
      Tensor& x = activation(m, inputs_[0]);
      Tensor& y = m.tensor(output_);
      if (y.dims != x.dims) bad("output " + dims_str(y.dims) + " differs from input");
      // The head applied the ReLU, and the plan made this node its output's one reader: those
      // bytes are this node's output.
      if (relu_in_head_)
        m.write_over(x, y, name_);
      else
        add_eltwise_forward(m, steps, kRelu, name_, x, y);
    });
    if (pool_.layer) pool_.build([&] { pool_.layer->build_forward(m, steps); });
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    // Where no gradient flows through the ReLU the pool builds no backward, and the planned
    // relu+maxpool backward stays open: FusionPlan::finish declines it saying so.
    bool masked = false;  // the pool did the ReLU's backward
    if (pool_.layer && x.needs_grad) {
      pool_.build([&] {
        const std::string why_not = pool_offer_->build_backward_through_relu(m, steps, x);
        m.plan().resolve(FusionKind::kReluMaxPoolBackward, pool_.node, why_not);
        masked = why_not.empty();
      });
    }
    if (pool_.layer) m.end_node_backward(pool_.node);
    if (x.needs_grad && !masked) {
      with_dnnl("node " + name_, [&] {
        Tensor& y = m.tensor(output_);
        if (relu_in_head_ && head_offer_->masks_relu_gradient())
          m.hand_over_diff(y, x, steps, name_ + ": eltwise backward: gradient to the batch norm");
        else
          add_eltwise_backward(m, steps, kRelu, name_, x, y);
      });
    }
    if (!head_.layer) return;
    m.end_node_backward(index_);
    head_.build([&] { head_.layer->build_backward(m, steps); });
  }

 private:
  // The use_dst form: backward reads the output, so the input need not be kept.
  static constexpr dnnl::algorithm kRelu = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;

  static int32_t relu_node(const FusedSpan& span) {
    const bool head = span.has(FusionKind::kConvRelu) || span.has(FusionKind::kBatchNormRelu);
    return span.first + (head ? 1 : 0);
  }

  Member head_, pool_;
  ReluHead* head_offer_ = nullptr;
  ReluMaskingPool* pool_offer_ = nullptr;
  FusionKind head_kind_ = FusionKind::kConvRelu;
  bool relu_in_head_ = false;  // the head's primitive applies the ReLU
};

// [FC] [-> softmax cross-entropy] under fused_step: the FC whose weight-gradient GEMM applies
// SGD (fc_layer.cpp's GemmWithSgd), the loss that makes the logits' gradient in forward
// (SoftmaxCrossEntropyLayer's comment) and, with both, the loss's column sums of that gradient
// as the FC's bias gradient instead of a pass over it. Each where the other's form allows it:
// the column sums need the GEMM strategy and the gradient made in forward.
class FcLossLayer final : public Layer {
 public:
  FcLossLayer(const dlhost_graph* g, const FusedSpan& span) : span_(span) {
    for (int32_t n = span.first; n <= span.last; ++n) {
      const int32_t op = g->nodes[n]->op;
      Member& slot = op == DLHOST_OP_FC ? fc_ : loss_;
      if ((op != DLHOST_OP_FC && op != DLHOST_OP_SOFTMAX_CROSS_ENTROPY) || slot.layer)
        bad_span(g, span);
      slot = member(g, n);
    }
    if (fc_.layer) fc_offer_ = offer_of<FcGradients>(fc_, "FC gradients");
    if (loss_.layer) loss_offer_ = offer_of<LossGradientInForward>(loss_, "gradient in forward");
    // The planner adds the column sums with the gradient in forward, and a loss only with them.
    if ((span.has(FusionKind::kLossBiasColumnSums) && !(fc_.layer && loss_.layer)) ||
        (loss_.layer && !span.has(FusionKind::kLossGradientInForward)))
      bad_span(g, span);
  }

  void build_forward(Model& m, Steps& steps) override {
    if (fc_.layer) {
      fc_.build([&] {
        if (span_.has(FusionKind::kFcSgdUpdate)) fc_offer_->offer_sgd();
        fc_.layer->build_forward(m, steps);
      });
      const std::string why_not = fc_offer_->gemm_declined();
      if (span_.has(FusionKind::kFcSgdUpdate))
        m.plan().resolve(FusionKind::kFcSgdUpdate, fc_.node, why_not);
      if (!why_not.empty()) decline_column_sums(m, why_not);
    }
    if (loss_.layer) {
      loss_.build([&] {
        loss_offer_->offer_gradient_in_forward();
        loss_.layer->build_forward(m, steps);
      });
      const std::string why_not = loss_offer_->gradient_in_forward_declined();
      m.plan().resolve(FusionKind::kLossGradientInForward, loss_.node, why_not);
      // No gradient in forward, no column sums: this reason wins over the FC's, as the sums
      // come from the loss's form.
      if (!why_not.empty()) decline_column_sums(m, why_not);
    }
  }

  void build_backward(Model& m, Steps& steps) override {
    if (loss_.layer) {
      loss_.build([&] { loss_.layer->build_backward(m, steps); });
      m.end_node_backward(loss_.node);
    }
    if (!fc_.layer) return;
    if (span_.has(FusionKind::kLossBiasColumnSums) && !sums_declined_) {
      const float* sums = loss_offer_->column_sums();
      m.plan().resolve(FusionKind::kLossBiasColumnSums, fc_.node,
                       sums != nullptr ? "" : "the loss made no column sums");
      if (sums != nullptr) fc_offer_->take_bias_gradient(sums);
    }
    fc_.build([&] { fc_.layer->build_backward(m, steps); });
  }

 private:
  void decline_column_sums(Model& m, const std::string& why) {
    if (!span_.has(FusionKind::kLossBiasColumnSums)) return;
    m.plan().resolve(FusionKind::kLossBiasColumnSums, fc_.node, why);
    sums_declined_ = true;
  }

  FusedSpan span_;
  Member fc_, loss_;
  FcGradients* fc_offer_ = nullptr;
  LossGradientInForward* loss_offer_ = nullptr;
  bool sums_declined_ = false;
};

}  // namespace

std::unique_ptr<Layer> make_fused_layer(const dlhost_graph* graph, const FusedSpan& span) {
  if (span.has(FusionKind::kConvRelu) || span.has(FusionKind::kBatchNormRelu) ||
      span.has(FusionKind::kReluMaxPoolBackward))
    return std::make_unique<ReluChainLayer>(graph, span);
  return std::make_unique<FcLossLayer>(graph, span);
}

}  // namespace dlhost::cpu_onednn
