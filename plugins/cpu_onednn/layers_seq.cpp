// layers_seq.cpp — the ABI 1.1 ops of sequence models: the embedding lookup (plain OpenMP
// loops: oneDNN has no gather primitive) and the multi-layer LSTM (oneDNN's lstm_forward and
// lstm_backward, one primitive per layer). Layers exist only while a model compiles, as in
// layers.cpp.
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "dlhost/common.hpp"
#include "layers.h"
#include "model.h"

namespace dlhost::cpu_onednn {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using dnnl::memory;
using dnnl::prop_kind;

// ids [N, T] -> rows of table [vocab, dim]: [N, T, dim], all plain.
class EmbeddingLayer : public NodeLayer {
 public:
  EmbeddingLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n),
        a_(node_attrs<dlhost_embedding_attrs>(n, DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    expect_params(1);
    if (a_.vocab <= 0 || a_.dim <= 0) bad("vocab and dim must be > 0");
  }

  void build_forward(Model& m, Steps& steps) override {
    Tensor& ids = m.tensor(inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (ids.dtype != DLHOST_DTYPE_I32 || ids.dims.size() != 2 || !ids.value)
      bad("ids " + ids.name + " must be computed I32 [N, T]");
    if (y.dims != std::vector<int64_t>{ids.dims[0], ids.dims[1], a_.dim})
      bad("output " + dims_str(y.dims) + " for ids " + dims_str(ids.dims));
    // set_input checks every id against the range, so the loops below need not.
    if (ids.label_classes != 0 && ids.label_classes != a_.vocab)
      bad("ids " + ids.name + " also used as labels of another class count");
    ids.label_classes = a_.vocab;
    const Md table_md = plain_md({a_.vocab, a_.dim}, dt::f32);
    m.alloc_param(params_[0], table_md, table_md);
    m.alloc_tensor(y, plain_md(y.dims, dt::f32));
    const int32_t* id = static_cast<const int32_t*>(ids.value.get_data_handle());
    const float* table = static_cast<const float*>(m.param(params_[0]).value.get_data_handle());
    float* out = static_cast<float*>(y.value.get_data_handle());
    const int64_t positions = ids.elements, dim = a_.dim;
    m.add_function(steps, name_ + ": embedding gather", [id, table, out, positions, dim] {
#pragma omp parallel for schedule(static) if (positions * dim > kParallelMin)
      for (int64_t p = 0; p < positions; ++p)
        std::memcpy(out + p * dim, table + static_cast<int64_t>(id[p]) * dim,
                    static_cast<size_t>(dim) * sizeof(float));
    });
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& ids = m.tensor(inputs_[0]);
    Tensor& y = m.tensor(output_);
    const int32_t* id = static_cast<const int32_t*>(ids.value.get_data_handle());
    const float* dy = static_cast<const float*>(m.diff_of(y).get_data_handle());
    Param& table = m.param(params_[0]);
    float* grad = static_cast<float*>(table.grad.get_data_handle());
    // A tied output layer (built before, as it comes later in the graph) wrote its part of the
    // table's gradient already: the lookup's adds to it.
    const bool accumulate = table.grad_written;
    table.grad_written = true;
    const int64_t positions = ids.elements, dim = a_.dim, vocab = a_.vocab;
    // Thread t owns the rows r with r % threads == t: no two threads touch one row, and each row
    // sums its positions in position order, so the result does not depend on the thread count.
    // Every thread scans all ids, which is cheap next to the row additions.
    m.add_function(steps, name_ + ": embedding scatter-add",
                   [id, dy, grad, positions, dim, vocab, accumulate] {
#pragma omp parallel if (positions * dim > kParallelMin || vocab * dim > kParallelMin)
                     {
                       const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
                       for (int64_t r = me; r < vocab && !accumulate; r += threads)
                         std::memset(grad + r * dim, 0, static_cast<size_t>(dim) * sizeof(float));
                       for (int64_t p = 0; p < positions; ++p) {
                         const int64_t r = id[p];
                         if (r % threads != me) continue;
                         float* g = grad + r * dim;
                         const float* d = dy + p * dim;
                         for (int64_t j = 0; j < dim; ++j) g[j] += d[j];
                       }
                     }
                   });
    m.add_ready(steps, params_[0]);
  }

 private:
  dlhost_embedding_attrs a_;
};

// A stack of unidirectional LSTM layers, one oneDNN primitive each: a multi-layer primitive
// needs C == H in every layer and one weight buffer for all layers, while the parameters here
// are per layer. The graph's [N, T, C] tensors are handed to oneDNN as [T, N, C] with the ntc
// tag (the same bytes), and the hidden sequences between layers are ntc too: oneDNN 2.6's
// backward computes NaN weight gradients for an ntc source with a tnc destination.
//
// Parameters are kept in oneDNN's ldigo layout ([layer, direction, input, gate, output]); the
// canonical [4H, C] of dlhost_graph.h is ldgoi over the same dims, with the same gate order
// (i, f, g, o), so read/write_param's reorder converts between the two.
class LstmLayer : public NodeLayer {
 public:
  LstmLayer(const dlhost_graph* g, const dlhost_node& n)
      : NodeLayer(g, n), a_(node_attrs<dlhost_lstm_attrs>(n, DLHOST_LSTM_ATTRS_STRUCT_SIZE)) {
    expect_inputs(1);
    if (a_.hidden <= 0 || a_.layers <= 0) bad("hidden and layers must be > 0");
    expect_params(static_cast<size_t>(3 * a_.layers));
  }

  void build_forward(Model& m, Steps& steps) override {
    m.refuse_bf16(name_, "lstm");
    Tensor& x = activation(m, inputs_[0]);
    Tensor& y = m.tensor(output_);
    if (x.dims.size() != 3) bad("input " + dims_str(x.dims) + " is not [N, T, C]");
    const int64_t n = x.dims[0], t = x.dims[1], c = x.dims[2], h = a_.hidden;
    if (y.dims != std::vector<int64_t>{n, t, h})
      bad("output " + dims_str(y.dims) + " for input " + dims_str(x.dims));
    const std::string what = name_ + ": lstm forward";
    memory src = view(m.as_layout(x.value, plain_md(x.dims, dt::f32), steps, what),
                      Md({t, n, c}, dt::f32, tag::ntc));
    m.alloc_tensor(y, plain_md(y.dims, dt::f32));
    const memory dst = view(y.value, Md({t, n, h}, dt::f32, tag::ntc));
    layers_.resize(a_.layers);
    for (int64_t l = 0; l < a_.layers; ++l) {
      PerLayer& layer = layers_[l];
      const int64_t in = l == 0 ? c : h;
      layer.weight = params_[3 * l];
      layer.weight_iter = params_[3 * l + 1];
      layer.bias = params_[3 * l + 2];
      layer.src = src;
      layer.dst = l + 1 == a_.layers ? dst : m.alloc(Md({t, n, h}, dt::f32, tag::ntc));
      const Md w = Md({1, 1, in, 4, h}, dt::f32, tag::ldigo);
      const Md wi = Md({1, 1, h, 4, h}, dt::f32, tag::ldigo);
      const Md b = Md({1, 1, 4, h}, dt::f32, tag::ldgo);
      // Zero descriptors for the states: they start at zero and the final ones are not needed.
      layer.pd = compat::make_pd<dnnl::lstm_forward>(
          m.engine(), m.attr(), false, prop_kind::forward_training,
          dnnl::rnn_direction::unidirectional_left2right, layer.src.get_desc(), Md(), Md(), w, wi,
          b, layer.dst.get_desc(), Md(), Md());
      m.alloc_param(layer.weight, w, Md({1, 1, in, 4, h}, dt::f32, tag::ldgoi));
      m.alloc_param(layer.weight_iter, wi, Md({1, 1, h, 4, h}, dt::f32, tag::ldgoi));
      m.alloc_param(layer.bias, b, b);
      layer.workspace = m.alloc(layer.pd.workspace_desc());
      m.add_primitive(steps, what + " layer " + std::to_string(l), dnnl::lstm_forward(layer.pd),
                      layer.pd,
                      {{DNNL_ARG_SRC_LAYER, layer.src},
                       {DNNL_ARG_WEIGHTS_LAYER, m.param(layer.weight).value},
                       {DNNL_ARG_WEIGHTS_ITER, m.param(layer.weight_iter).value},
                       {DNNL_ARG_BIAS, m.param(layer.bias).value},
                       {DNNL_ARG_DST_LAYER, layer.dst},
                       {DNNL_ARG_WORKSPACE, layer.workspace}});
      m.note_implementation("lstm fwd", layer.pd.impl_info_str());
      src = layer.dst;
    }
  }

  void build_backward(Model& m, Steps& steps) override {
    Tensor& x = m.tensor(inputs_[0]);
    Tensor& y = m.tensor(output_);
    memory diff_dst = view(m.diff_of(y), layers_.back().dst.get_desc());
    for (int64_t l = a_.layers - 1; l >= 0; --l) {
      PerLayer& layer = layers_[l];
      const std::string what = name_ + ": lstm backward layer " + std::to_string(l);
      const Md src_md = layer.src.get_desc(), dst_md = layer.dst.get_desc();
      const Md w = m.param(layer.weight).value.get_desc();
      const Md wi = m.param(layer.weight_iter).value.get_desc();
      const Md b = m.param(layer.bias).value.get_desc();
      // Backward reads the weights in a layout of its own (ldgoi, padded), reordered each step;
      // it writes their gradients in ldigo, the parameters' layout.
      const auto pd = compat::make_bwd_pd<dnnl::lstm_backward>(
          m.engine(), m.attr(), layer.pd, false, prop_kind::backward,
          dnnl::rnn_direction::unidirectional_left2right, src_md, Md(), Md(),
          any_md(compat::dims_of(w)), any_md(compat::dims_of(wi)), b, dst_md, Md(), Md(), src_md,
          Md(), Md(), w, wi, b, dst_md, Md(), Md());
      memory weights =
          m.as_layout(m.param(layer.weight).value, pd.weights_layer_desc(), steps, what);
      memory weights_iter =
          m.as_layout(m.param(layer.weight_iter).value, pd.weights_iter_desc(), steps, what);
      Steps post;
      memory diff_src;
      if (l > 0) {
        diff_src = m.scratch(src_md);  // the diff_dst of the layer below
      } else if (x.needs_grad) {
        diff_src = view(m.diff_sink(x, plain_md(x.dims, dt::f32), post, what), src_md);
      } else {
        diff_src = m.scratch(src_md);  // computed by oneDNN in any case, read by nobody
      }
      memory dw = m.output_as(m.param(layer.weight).grad, pd.diff_weights_layer_desc(), post, what);
      memory dwi =
          m.output_as(m.param(layer.weight_iter).grad, pd.diff_weights_iter_desc(), post, what);
      memory db = m.output_as(m.param(layer.bias).grad, pd.diff_bias_desc(), post, what);
      // oneDNN's RNN backward adds into its weight gradients; the ABI's backward overwrites.
      m.add_function(steps, what + ": zero gradients", [dw, dwi, db] {
        for (const memory* g : {&dw, &dwi, &db})
          std::memset(g->get_data_handle(), 0, g->get_desc().get_size());
      });
      m.add_primitive(steps, what, dnnl::lstm_backward(pd), pd,
                      {{DNNL_ARG_SRC_LAYER, layer.src},
                       {DNNL_ARG_WEIGHTS_LAYER, weights},
                       {DNNL_ARG_WEIGHTS_ITER, weights_iter},
                       {DNNL_ARG_BIAS, m.param(layer.bias).value},
                       {DNNL_ARG_DST_LAYER, layer.dst},
                       {DNNL_ARG_DIFF_DST_LAYER, diff_dst},
                       {DNNL_ARG_WORKSPACE, layer.workspace},
                       {DNNL_ARG_DIFF_SRC_LAYER, diff_src},
                       {DNNL_ARG_DIFF_WEIGHTS_LAYER, dw},
                       {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi},
                       {DNNL_ARG_DIFF_BIAS, db}});
      steps.insert(steps.end(), post.begin(), post.end());
      m.add_ready(steps, layer.weight);
      m.add_ready(steps, layer.weight_iter);
      m.add_ready(steps, layer.bias);
      m.note_implementation("lstm bwd", pd.impl_info_str());
      diff_dst = diff_src;
    }
  }

 private:
  struct PerLayer {
    int32_t weight = -1, weight_iter = -1, bias = -1;
    memory src, dst, workspace;  // [T, N, C_l] and [T, N, H] as oneDNN sees them
    dnnl::lstm_forward::primitive_desc pd;
  };

  dlhost_lstm_attrs a_;
  std::vector<PerLayer> layers_;
};

}  // namespace

std::unique_ptr<Layer> make_embedding_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<EmbeddingLayer>(graph, node);
}
std::unique_ptr<Layer> make_lstm_layer(const dlhost_graph* graph, const dlhost_node& node) {
  return std::make_unique<LstmLayer>(graph, node);
}

}  // namespace dlhost::cpu_onednn
