// fusion_plan.h — cpu_onednn's fusion-planning pass: before any primitive is made, Model's
// constructor reads the graph once and lists the fused nodes it will build (a convolution or batch
// norm with its ReLU, a ReLU whose backward a max pool does, the softmax loss that makes its
// gradient in forward and hands the column sums to the FC's bias gradient, an FC whose backward
// applies SGD), as ONNX Runtime's dnnl execution provider rewrites its subgraph into fused nodes
// before it makes primitives. The fused nodes that share a graph node form one span (AlexNet's
// conv2+relu2 and relu2+pool2: conv2, relu2, pool2), and each span is built by ONE layer object,
// a fused layer (fused_layers.cpp), in place of the plain layers of its nodes (asked for each
// node's steps at that node's place in the order): the plain layers never see the plan. Where
// oneDNN's choice of kernel or layout rules a planned fusion out, the fused layer declines it with
// the reason and builds that part as the plain layers would, so the plan afterwards says what was
// built. The FC's strategy (blocked inner product, GEMM, bf16 matmul) is chosen here too
// (choose_fc_strategy) and recorded per node.
//
// Inspect: Model::plan().describe() (the white-box test test_cpu_onednn_internals.cpp asserts
// it), or DLHOST_CPU_ONEDNN_PLAN=1, which prints it to stderr when a model is compiled.
// Internal to the plugin; used by one model's constructor on one thread (model.h).
#ifndef DLHOST_CPU_ONEDNN_FUSION_PLAN_H
#define DLHOST_CPU_ONEDNN_FUSION_PLAN_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dlhost/dlhost_graph.h"

namespace dlhost::cpu_onednn {

// What the planner may fuse, from the host's compile options.
struct PlanOptions {
  bool fused_step = false;       // the host's fused_step: nothing reads gradients before update
  bool sgd_in_backward = false;  // Model::sgd_in_backward(): SGD may go into a GEMM's beta
};

enum class FusionKind {
  kConvRelu,       // {conv, relu}: the ReLU a post-op of the convolution
  kBatchNormRelu,  // {batch norm, relu}: oneDNN's fuse_norm_relu; its backward masks the gradient
  kReluMaxPoolBackward,    // {relu, max pool}: the pool's backward does the ReLU's (a mask)
  kLossGradientInForward,  // {softmax cross-entropy}: fused_step's gradient made in forward
  kLossBiasColumnSums,     // {fc, loss}: the loss's column sums are the FC's bias gradient
  kFcSgdUpdate,            // {fc}: the weight-gradient GEMM applies SGD (fused_step, plain SGD)
};
// "conv+relu", "bnorm+relu", "relu+maxpool backward", "xent gradient in forward",
// "xent column sums -> fc bias", "fc backward+sgd".
const char* fusion_name(FusionKind kind);

enum class FusionState { kPlanned, kApplied, kDeclined };

struct FusedNode {
  FusionKind kind;
  std::vector<int32_t> nodes;   // graph node indices, in graph order
  std::vector<int32_t> inputs;  // each node's first input tensor (-1: none)
  std::string label;            // their names joined with '+'
  FusionState state = FusionState::kPlanned;
  std::string why_declined;
};

// The graph nodes one fused layer builds: the fused nodes of the plan that share a graph node,
// joined. Its nodes need not be neighbours (a labels input may stand between an FC and its
// loss): the fused layer builds each at its own place in the order.
struct FusedSpan {
  std::vector<int32_t> nodes;     // graph node indices, in graph order
  std::vector<FusionKind> kinds;  // of its fused nodes, in plan order
  bool has(FusionKind kind) const;
};

enum class FcStrategyKind { kBlockedInnerProduct, kGemm, kBf16Matmul };
const char* fc_strategy_name(FcStrategyKind kind);  // "blocked inner product", "gemm", ...

// What decides an FC's strategy (FcLayer's comment has the measurements behind each rule).
struct FcFacts {
  bool bf16 = false;             // precision bf16: every FC multiplies bf16 copies
  bool plain_source = false;     // the input is plain row-major (or a per-time-step view)
  int64_t rows = 0;              // the product's rows: batch (x time steps)
  int threads = 1;               // the case's OpenMP threads
  bool blocked_scales = false;   // the blocked inner product scales to 2+ threads on this CPU
  bool sgd_in_backward = false;  // SGD may go into the GEMM (only dnnl_sgemm's beta allows it)
};
// Rows from which the GEMM path beats the blocked inner product at 1 thread.
inline constexpr int64_t kFcGemmMinRows = 256;
FcStrategyKind choose_fc_strategy(const FcFacts& facts);

class FusionPlan {
 public:
  FusionPlan() = default;
  // The fusions `graph`'s structure allows under `options` (all kPlanned).
  FusionPlan(const dlhost_graph* graph, const PlanOptions& options);

  const std::vector<FusedNode>& fused() const { return fused_; }
  // The fused node of `kind` that holds graph node `node`, or nullptr.
  FusedNode* find(FusionKind kind, int32_t node);
  const FusedNode* find(FusionKind kind, int32_t node) const;
  // The span that holds graph node `node`, or nullptr (a plain layer builds the node).
  const FusedSpan* span_of(int32_t node) const;
  // A planned fusion that its fused layer applied: "" for `why_not`; or declined with the reason
  // (a no-op where the plan has none of `kind` at `node`).
  void resolve(FusionKind kind, int32_t node, const std::string& why_not);

  // After the layers are built: a fusion still only planned was taken up by no layer (its
  // backward half had no gradient to work on); it is declined saying so.
  void finish();

  void record_fc_strategy(int32_t node, FcStrategyKind kind);
  // Parameters whose SGD step the backward applied (kFcSgdUpdate applied): update() skips them
  // (momentum 0) or only adds the decay and steps (momentum).
  bool updated_in_backward(int32_t param) const;

  // One line per fused node ("conv+relu conv1+relu1: applied") and per FC strategy
  // ("fc fc1: gemm"), in graph order; declined ones with their reason.
  std::string describe() const;
  // The applied fused nodes only, as "kind label" strings: what tests compare.
  std::vector<std::string> applied_list() const;
  std::vector<std::string> planned_list() const;  // every planned node, whatever its state
  // Each span's nodes, "conv2+relu2+pool2": the fused layers a model builds.
  std::vector<std::string> span_list() const;

 private:
  std::vector<FusedNode> fused_;
  std::vector<FusedSpan> spans_;  // by first node
  std::vector<std::string> node_names_;
  std::vector<std::vector<int32_t>> node_params_;
  std::vector<std::pair<int32_t, FcStrategyKind>> fc_strategies_;
  std::vector<bool> updated_in_backward_;  // by parameter id
};

}  // namespace dlhost::cpu_onednn

#endif  // DLHOST_CPU_ONEDNN_FUSION_PLAN_H
