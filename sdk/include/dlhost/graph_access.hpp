// graph_access.hpp — reading the graph a backend compiles, one way for every backend: a node's
// typed attributes with the struct_size check, its inputs checked by count and range, and the
// geometry of a 2-D convolution or pooling (output size, padding, ceil mode) computed once from
// the input tensor and the attributes, as dlhost_graph.h defines it; a fully connected layer's
// rows and fan-in likewise; parameters checked against the sizes the geometry implies.
//
// Every check throws sdk::invalid (INVALID_ARGUMENT) with "<plugin>: node '<name>' ..." so that a
// malformed graph is refused at compile with the node named. Header-only, compiled into the
// plugin; nothing here crosses the ABI. Pure functions; thread-safe.
#ifndef DLHOST_GRAPH_ACCESS_HPP
#define DLHOST_GRAPH_ACCESS_HPP

#include <cstdint>
#include <string>

#include "dlhost/plugin_kit.hpp"

namespace dlhost::sdk {

// The struct_size of the first ABI release that had each attribute struct: a graph from a 1.0
// host has a shorter dlhost_fc_attrs (no batch_dims), which is valid; read the newer fields with
// DLHOST_HAS_FIELD. Every attribute struct of the ABI is here, so that node_attrs<A> compiles for
// each and no backend casts node.attrs unchecked; a struct added in a later minor gets its line
// with its first release's size.
template <class Attrs>
struct AttrsMinSize;
#define DLHOST_DETAIL_ATTRS_MIN(type, size) \
  template <>                               \
  struct AttrsMinSize<type> {               \
    static constexpr size_t value = size;   \
  }
DLHOST_DETAIL_ATTRS_MIN(dlhost_fc_attrs, DLHOST_FC_ATTRS_STRUCT_SIZE_1_0);
DLHOST_DETAIL_ATTRS_MIN(dlhost_conv2d_attrs, DLHOST_CONV2D_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_pool2d_attrs, DLHOST_POOL2D_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_activation_attrs, DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_batch_norm_attrs, DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_dropout_attrs, DLHOST_DROPOUT_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_lrn_attrs, DLHOST_LRN_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_embedding_attrs, DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_lstm_attrs, DLHOST_LSTM_ATTRS_STRUCT_SIZE);
// ABI 1.4: the Transformer ops.
DLHOST_DETAIL_ATTRS_MIN(dlhost_layer_norm_attrs, DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_gelu_attrs, DLHOST_GELU_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_attention_attrs, DLHOST_ATTENTION_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_position_embedding_attrs,
                        DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE);
DLHOST_DETAIL_ATTRS_MIN(dlhost_tied_fc_attrs, DLHOST_TIED_FC_ATTRS_STRUCT_SIZE);
#undef DLHOST_DETAIL_ATTRS_MIN

// "node 'conv1'" for messages.
inline std::string node_label(const dlhost_node& node) {
  return std::string("node '") + (node.name != nullptr ? node.name : "?") + "'";
}

// The node's attributes as `Attrs`, refused when absent or shorter than `min_size` (by default
// the struct's first release).
template <class Attrs>
const Attrs& node_attrs(const dlhost_node& node, size_t min_size = AttrsMinSize<Attrs>::value) {
  const auto* attrs = static_cast<const Attrs*>(node.attrs);
  if (attrs == nullptr || attrs->struct_size < min_size)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) + " (" + op_name(node.op) +
            ") has " + (attrs == nullptr ? "no" : "truncated") + " attributes");
  return *attrs;
}

// Refuses a node whose input count is not `count`, or whose inputs are not tensors of `graph`.
inline void expect_inputs(const dlhost_graph& graph, const dlhost_node& node, int32_t count) {
  if (node.num_inputs != count || (count > 0 && node.inputs == nullptr))
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) + " (" + op_name(node.op) +
            ") has " + std::to_string(node.num_inputs) + " inputs, its op takes " +
            std::to_string(count));
  for (int32_t i = 0; i < count; ++i)
    if (node.inputs[i] < 0 || node.inputs[i] >= graph.num_tensors)
      invalid(std::string(detail::plugin_name()) + ": " + node_label(node) + " input " +
              std::to_string(i) + " is tensor " + std::to_string(node.inputs[i]) +
              ", out of range");
}

// The input tensor `i` of a node whose inputs were checked.
inline const dlhost_tensor_desc& input_tensor(const dlhost_graph& graph, const dlhost_node& node,
                                              int32_t i) {
  return *graph.tensors[node.inputs[i]];
}

// Refuses a node whose parameter `i` is missing or does not hold `count` elements (a weight of
// the wrong size would be read out of bounds by every kernel).
inline void expect_param(const dlhost_graph& graph, const dlhost_node& node, int32_t i,
                         int64_t count) {
  if (i >= node.num_params || node.params == nullptr || node.params[i] < 0 ||
      node.params[i] >= graph.num_params)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) + " (" + op_name(node.op) +
            ") lacks parameter " + std::to_string(i));
  if (graph.params[node.params[i]]->count != count)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) + " parameter " +
            std::to_string(i) + " has " + std::to_string(graph.params[node.params[i]]->count) +
            " elements, its geometry needs " + std::to_string(count));
}

// A fully connected layer's sizes: `rows` positions (the kept leading dims: N, or N x T with
// batch_dims 2) of `in` features each (the rest of the input flattened: the fan-in) to `out`.
struct FcGeometry {
  int64_t rows = 0, in = 0, out = 0;
  bool bias = false;
};

// fc: the input's first batch_dims dims are kept (1 when the field is absent: ABI 1.0), the rest
// flattened; W is [out, in], b [out]. Checks the inputs and the parameters' sizes.
inline FcGeometry fc_geometry(const dlhost_graph& graph, const dlhost_node& node) {
  expect_inputs(graph, node, 1);
  const auto& a = node_attrs<dlhost_fc_attrs>(node);
  int32_t keep = DLHOST_HAS_FIELD(&a, dlhost_fc_attrs, batch_dims) ? a.batch_dims : 1;
  if (keep == 0) keep = 1;
  const dlhost_tensor_desc& x = input_tensor(graph, node, 0);
  if (keep < 1 || keep >= x.rank)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) + " keeps " +
            std::to_string(keep) + " leading dims of a rank-" + std::to_string(x.rank) + " input");
  FcGeometry g;
  g.rows = 1, g.in = 1, g.out = a.out_features, g.bias = a.has_bias != 0;
  for (int32_t k = 0; k < x.rank; ++k) (k < keep ? g.rows : g.in) *= x.dims[k];
  expect_param(graph, node, 0, g.out * g.in);
  if (g.bias) expect_param(graph, node, 1, g.out);
  return g;
}

// A 2-D window op's sizes, NCHW: input n c h w, output oc oh ow.
struct Geometry2d {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t oc = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t groups = 1;
};

namespace detail {
// The node's one NCHW input, checked, as a geometry with n c h w filled.
inline Geometry2d nchw_input(const dlhost_graph& graph, const dlhost_node& node) {
  expect_inputs(graph, node, 1);
  const dlhost_tensor_desc& x = input_tensor(graph, node, 0);
  if (x.rank != 4)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) + " (" + op_name(node.op) +
            ") needs an NCHW input, got rank " + std::to_string(x.rank));
  Geometry2d g;
  g.n = x.dims[0], g.c = x.dims[1], g.h = x.dims[2], g.w = x.dims[3];
  return g;
}
}  // namespace detail

// conv2d: output = floor((in + 2 pad - dilation (k - 1) - 1) / stride) + 1 (dlhost_graph.h).
inline Geometry2d conv2d_geometry(const dlhost_graph& graph, const dlhost_node& node) {
  Geometry2d g = detail::nchw_input(graph, node);
  const auto& a = node_attrs<dlhost_conv2d_attrs>(node);
  g.oc = a.out_channels, g.kh = a.kernel_h, g.kw = a.kernel_w;
  g.sh = a.stride_h, g.sw = a.stride_w, g.ph = a.pad_h, g.pw = a.pad_w;
  g.dh = a.dilation_h, g.dw = a.dilation_w, g.groups = a.groups;
  if (g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.groups < 1 || g.c % g.groups != 0 ||
      g.oc % g.groups != 0)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) +
            " has a stride, dilation or group count that does not fit its channels");
  g.oh = (g.h + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.ow = (g.w + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  if (g.oh < 1 || g.ow < 1)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) +
            " has a kernel larger than its padded input");
  expect_param(graph, node, 0, g.oc * (g.c / g.groups) * g.kh * g.kw);  // W [OC, C/groups, KH, KW]
  if (a.has_bias) expect_param(graph, node, 1, g.oc);
  return g;
}

// pool2d: floor or (ceil_mode) ceil of (in + 2 pad - k) / stride, + 1; in ceil mode a last
// window that would start in the right padding is dropped (Caffe and PyTorch).
inline Geometry2d pool2d_geometry(const dlhost_graph& graph, const dlhost_node& node) {
  Geometry2d g = detail::nchw_input(graph, node);
  const auto& a = node_attrs<dlhost_pool2d_attrs>(node);
  g.oc = g.c;
  g.kh = a.kernel_h, g.kw = a.kernel_w, g.sh = a.stride_h, g.sw = a.stride_w;
  g.ph = a.pad_h, g.pw = a.pad_w;
  if (g.sh < 1 || g.sw < 1)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) + " has a stride below 1");
  auto out = [&](int64_t in, int64_t k, int64_t s, int64_t p) {
    int64_t span = in + 2 * p - k;
    int64_t o = (a.ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (a.ceil_mode && (o - 1) * s >= in + p) --o;
    return o;
  };
  g.oh = out(g.h, g.kh, g.sh, g.ph);
  g.ow = out(g.w, g.kw, g.sw, g.pw);
  if (g.oh < 1 || g.ow < 1)
    invalid(std::string(detail::plugin_name()) + ": " + node_label(node) +
            " has a window larger than its padded input");
  return g;
}

}  // namespace dlhost::sdk

#endif  // DLHOST_GRAPH_ACCESS_HPP
