// fusion_plan.cpp — the fusion-planning pass of cpu_onednn (fusion_plan.h): which nodes the graph's
// structure lets the layers fuse, the FC strategy rule, and the plan's description.
#include "fusion_plan.h"

#include <algorithm>

namespace dlhost::cpu_onednn {

namespace {

// The node's attributes as `Attrs` where present and at least `size` bytes, else nullptr: the
// planner only looks; the layer's constructor refuses a bad node with its own message.
template <class Attrs>
const Attrs* attrs_or_null(const dlhost_node& node, size_t size) {
  const auto* a = static_cast<const Attrs*>(node.attrs);
  return a != nullptr && a->struct_size >= size ? a : nullptr;
}

// One input: a ReLU with another count is the plain layer's to refuse.
bool is_relu(const dlhost_node& node) {
  if (node.op != DLHOST_OP_ACTIVATION || node.num_inputs != 1) return false;
  const auto* a = attrs_or_null<dlhost_activation_attrs>(node, DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE);
  return a != nullptr && a->kind == DLHOST_ACTIVATION_RELU;
}

bool is_max_pool(const dlhost_node& node) {
  if (node.op != DLHOST_OP_POOL2D) return false;
  const auto* a = attrs_or_null<dlhost_pool2d_attrs>(node, DLHOST_POOL2D_ATTRS_STRUCT_SIZE);
  return a != nullptr && a->kind == DLHOST_POOL_MAX;
}

bool fc_has_bias(const dlhost_node& node) {
  const auto* a = attrs_or_null<dlhost_fc_attrs>(node, DLHOST_FC_ATTRS_STRUCT_SIZE_1_0);
  return a != nullptr && a->has_bias != 0;
}

// The one node reading tensor `t` (its index), or -1 where none or several do.
int32_t only_reader(const dlhost_graph* g, int32_t t) {
  int32_t reader = -1;
  for (int32_t n = 0; n < g->num_nodes; ++n) {
    const dlhost_node& node = *g->nodes[n];
    for (int32_t i = 0; i < node.num_inputs; ++i) {
      if (node.inputs[i] != t) continue;
      if (reader >= 0) return -1;
      reader = n;
    }
  }
  return reader;
}

// The node writing tensor `t`, or -1.
int32_t producer(const dlhost_graph* g, int32_t t) {
  for (int32_t n = 0; n < g->num_nodes; ++n)
    if (g->nodes[n]->output == t) return n;
  return -1;
}

// Whether the only node reading tensor `t` is a ReLU activation; its index in *reader.
bool only_reader_is_relu(const dlhost_graph* g, int32_t t, int32_t* reader) {
  const int32_t n = only_reader(g, t);
  if (n < 0 || !is_relu(*g->nodes[n])) return false;
  if (reader != nullptr) *reader = n;
  return true;
}

}  // namespace

const char* fusion_name(FusionKind kind) {
  switch (kind) {
    case FusionKind::kConvRelu:
      return "conv+relu";
    case FusionKind::kBatchNormRelu:
      return "bnorm+relu";
    case FusionKind::kReluMaxPoolBackward:
      return "relu+maxpool backward";
    case FusionKind::kLossGradientInForward:
      return "xent gradient in forward";
    case FusionKind::kLossBiasColumnSums:
      return "xent column sums -> fc bias";
    case FusionKind::kFcSgdUpdate:
      return "fc backward+sgd";
  }
  return "?";
}

const char* fc_strategy_name(FcStrategyKind kind) {
  switch (kind) {
    case FcStrategyKind::kBlockedInnerProduct:
      return "blocked inner product";
    case FcStrategyKind::kGemm:
      return "gemm";
    case FcStrategyKind::kBf16Matmul:
      return "bf16 matmul";
  }
  return "?";
}

FcStrategyKind choose_fc_strategy(const FcFacts& f) {
  // bf16: matmuls on bf16 copies, a blocked source first reordered to plain.
  if (f.bf16) return FcStrategyKind::kBf16Matmul;
  // The GEMM path reads the source as a plain [rows, features] matrix; fused SGD needs
  // dnnl_sgemm's beta, which the inner product's backward lacks.
  const bool gemm_wins =
      f.rows >= kFcGemmMinRows || (f.threads > 1 && !f.blocked_scales) || f.sgd_in_backward;
  return gemm_wins && f.plain_source ? FcStrategyKind::kGemm : FcStrategyKind::kBlockedInnerProduct;
}

FusionPlan::FusionPlan(const dlhost_graph* g, const PlanOptions& options) {
  node_names_.resize(g->num_nodes);
  node_params_.resize(g->num_nodes);
  for (int32_t n = 0; n < g->num_nodes; ++n) {
    const dlhost_node& node = *g->nodes[n];
    node_names_[n] = node.name != nullptr ? node.name : "node" + std::to_string(n);
    node_params_[n].assign(node.params, node.params + node.num_params);
  }
  updated_in_backward_.assign(static_cast<size_t>(std::max(g->num_params, 0)), false);
  auto add = [&](FusionKind kind, std::vector<int32_t> nodes) {
    FusedNode f{kind, std::move(nodes), {}, "", FusionState::kPlanned, ""};
    for (size_t i = 0; i < f.nodes.size(); ++i) {
      const dlhost_node& node = *g->nodes[f.nodes[i]];
      f.label += (i ? "+" : "") + node_names_[f.nodes[i]];
      f.inputs.push_back(node.num_inputs > 0 ? node.inputs[0] : -1);
    }
    fused_.push_back(std::move(f));
  };
  for (int32_t n = 0; n < g->num_nodes; ++n) {
    const dlhost_node& node = *g->nodes[n];
    int32_t relu = -1;
    switch (node.op) {
      case DLHOST_OP_CONV2D:
        if (only_reader_is_relu(g, node.output, &relu)) add(FusionKind::kConvRelu, {n, relu});
        break;
      case DLHOST_OP_BATCH_NORM:
        if (only_reader_is_relu(g, node.output, &relu)) add(FusionKind::kBatchNormRelu, {n, relu});
        break;
      case DLHOST_OP_ACTIVATION: {
        const int32_t pool = is_relu(node) ? only_reader(g, node.output) : -1;
        if (pool >= 0 && is_max_pool(*g->nodes[pool]))
          add(FusionKind::kReluMaxPoolBackward, {n, pool});
        break;
      }
      case DLHOST_OP_FC:
        if (options.sgd_in_backward) add(FusionKind::kFcSgdUpdate, {n});
        break;
      case DLHOST_OP_SOFTMAX_CROSS_ENTROPY: {
        if (!options.fused_step || node.num_inputs < 1) break;
        add(FusionKind::kLossGradientInForward, {n});
        const int32_t fc = producer(g, node.inputs[0]);
        if (fc >= 0 && g->nodes[fc]->op == DLHOST_OP_FC && fc_has_bias(*g->nodes[fc]) &&
            only_reader(g, node.inputs[0]) == n)
          add(FusionKind::kLossBiasColumnSums, {fc, n});
        break;
      }
      default:
        break;
    }
  }
  // The spans: the fused nodes joined where they share a graph node (AlexNet-R's relu2 is in
  // conv+relu and relu+maxpool backward; FCN-5's fc4 in fc backward+sgd and the column sums).
  for (const FusedNode& f : fused_) {
    FusedSpan joined{f.nodes, {f.kind}};
    for (auto it = spans_.begin(); it != spans_.end();) {
      const bool shares = std::any_of(it->nodes.begin(), it->nodes.end(), [&](int32_t n) {
        return std::find(joined.nodes.begin(), joined.nodes.end(), n) != joined.nodes.end();
      });
      if (!shares) {
        ++it;
        continue;
      }
      joined.nodes.insert(joined.nodes.end(), it->nodes.begin(), it->nodes.end());
      joined.kinds.insert(joined.kinds.begin(), it->kinds.begin(), it->kinds.end());
      it = spans_.erase(it);
    }
    std::sort(joined.nodes.begin(), joined.nodes.end());
    joined.nodes.erase(std::unique(joined.nodes.begin(), joined.nodes.end()), joined.nodes.end());
    spans_.push_back(std::move(joined));
  }
  std::sort(spans_.begin(), spans_.end(), [](const FusedSpan& a, const FusedSpan& b) {
    return a.nodes.front() < b.nodes.front();
  });
}

bool FusedSpan::has(FusionKind kind) const {
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

FusedNode* FusionPlan::find(FusionKind kind, int32_t node) {
  for (FusedNode& f : fused_)
    if (f.kind == kind && std::find(f.nodes.begin(), f.nodes.end(), node) != f.nodes.end())
      return &f;
  return nullptr;
}

const FusedNode* FusionPlan::find(FusionKind kind, int32_t node) const {
  return const_cast<FusionPlan*>(this)->find(kind, node);
}

const FusedSpan* FusionPlan::span_of(int32_t node) const {
  for (const FusedSpan& s : spans_)
    if (std::find(s.nodes.begin(), s.nodes.end(), node) != s.nodes.end()) return &s;
  return nullptr;
}

void FusionPlan::resolve(FusionKind kind, int32_t node, const std::string& why_not) {
  FusedNode* f = find(kind, node);
  if (f == nullptr) return;
  f->state = why_not.empty() ? FusionState::kApplied : FusionState::kDeclined;
  f->why_declined = why_not;
  if (kind == FusionKind::kFcSgdUpdate && why_not.empty())
    for (int32_t p : node_params_[node])
      if (p >= 0 && static_cast<size_t>(p) < updated_in_backward_.size())
        updated_in_backward_[p] = true;
}

void FusionPlan::finish() {
  for (FusedNode& f : fused_)
    if (f.state == FusionState::kPlanned) {
      f.state = FusionState::kDeclined;
      f.why_declined = "taken up by no layer (no gradient flows there)";
    }
}

void FusionPlan::record_fc_strategy(int32_t node, FcStrategyKind kind) {
  fc_strategies_.emplace_back(node, kind);
}

bool FusionPlan::updated_in_backward(int32_t param) const {
  return param >= 0 && static_cast<size_t>(param) < updated_in_backward_.size() &&
         updated_in_backward_[param];
}

std::string FusionPlan::describe() const {
  std::string s;
  for (const FusedNode& f : fused_) {
    s += std::string(fusion_name(f.kind)) + " " + f.label + ": ";
    s += f.state == FusionState::kApplied   ? "applied"
         : f.state == FusionState::kPlanned ? "planned"
                                            : "declined (" + f.why_declined + ")";
    s += "\n";
  }
  for (const auto& [node, kind] : fc_strategies_)
    s += "fc " + node_names_[node] + ": " + fc_strategy_name(kind) + "\n";
  return s;
}

std::vector<std::string> FusionPlan::applied_list() const {
  std::vector<std::string> out;
  for (const FusedNode& f : fused_)
    if (f.state == FusionState::kApplied)
      out.push_back(std::string(fusion_name(f.kind)) + " " + f.label);
  return out;
}

std::vector<std::string> FusionPlan::planned_list() const {
  std::vector<std::string> out;
  for (const FusedNode& f : fused_) out.push_back(std::string(fusion_name(f.kind)) + " " + f.label);
  return out;
}

std::vector<std::string> FusionPlan::span_list() const {
  std::vector<std::string> out;
  for (const FusedSpan& span : spans_) {
    std::string label;
    for (int32_t n : span.nodes) label += (label.empty() ? "" : "+") + node_names_[n];
    out.push_back(label);
  }
  return out;
}

}  // namespace dlhost::cpu_onednn
