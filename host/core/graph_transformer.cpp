// graph_transformer.cpp — shape inference, parameters and FLOP counting for ABI 1.4's
// Transformer ops (layer_norm, gelu, attention, position_embedding, tied_fc), and their entries
// in the C builder table. The paper's ops are in graph.cpp; the conventions are its own: forward
// FLOPs per mini-batch, a multiply-add 2, an element-wise op 1 per element.
#include <cmath>

#include "core/graph.h"
#include "core/graph_checks.h"

namespace dlhost {

using namespace graph_detail;  // NOLINT(google-build-using-namespace): the builder's own helpers

namespace {

std::vector<int64_t> dims_of(const dlhost_tensor_desc& t) {
  return std::vector<int64_t>(t.dims, t.dims + t.rank);
}

void need_f32(const std::string& layer, const dlhost_tensor_desc& t, int32_t min_rank,
              const char* what) {
  if (t.dtype != DLHOST_DTYPE_F32 || t.rank < min_rank)
    bad(layer, std::string("needs ") + what + ", got " + shape_string(t));
}

}  // namespace

int32_t GraphBuilder::layer_norm(const std::string& name, int32_t x,
                                 const dlhost_layer_norm_attrs& a) {
  const auto& in = checked_tensor(name, x);
  need_f32(name, in, 2, "an F32 input of rank >= 2 (normalized over the last axis)");
  if (!(a.epsilon > 0)) bad(name, "epsilon must be > 0");
  const int64_t channels = in.dims[in.rank - 1];
  auto dims = dims_of(in);
  const double count = static_cast<double>(elements(in));
  auto& n = add_node(DLHOST_OP_LAYER_NORM, name, {x});
  n.layer_norm = a;
  n.layer_norm.struct_size = DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.layer_norm;
  add_param(n, DLHOST_PARAM_SCALE, {channels}, DLHOST_INIT_ONE, channels, channels);
  add_param(n, DLHOST_PARAM_SHIFT, {channels}, DLHOST_INIT_ZERO, channels, channels);
  n.node.forward_flops = 4.0 * count;  // statistics (2) and the affine normalization (2), as BN
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::gelu(const std::string& name, int32_t x, const dlhost_gelu_attrs& a) {
  const auto& in = checked_tensor(name, x);
  need_f32(name, in, 1, "an F32 input");
  if (a.approximation != DLHOST_GELU_ERF && a.approximation != DLHOST_GELU_TANH)
    bad(name, "approximation must be 0 (erf) or 1 (tanh), got " + std::to_string(a.approximation));
  auto dims = dims_of(in);
  const double count = static_cast<double>(elements(in));
  auto& n = add_node(DLHOST_OP_GELU, name, {x});
  n.gelu = a;
  n.gelu.struct_size = DLHOST_GELU_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.gelu;
  n.node.forward_flops = count;  // an activation: 1 per element, as relu and tanh count
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::attention(const std::string& name, int32_t q, int32_t k, int32_t v,
                                const dlhost_attention_attrs& a) {
  const auto& tq = checked_tensor(name, q);
  const auto& tk = checked_tensor(name, k);
  const auto& tv = checked_tensor(name, v);
  bool same = tq.rank == 3 && tk.rank == 3 && tv.rank == 3 && tq.dtype == DLHOST_DTYPE_F32 &&
              tk.dtype == DLHOST_DTYPE_F32 && tv.dtype == DLHOST_DTYPE_F32;
  for (int32_t i = 0; same && i < 3; ++i)
    same = tq.dims[i] == tk.dims[i] && tq.dims[i] == tv.dims[i];
  if (!same)
    bad(name, "q, k and v must be F32 [N, T, heads * d] of one shape, got " + shape_string(tq) +
                  ", " + shape_string(tk) + ", " + shape_string(tv));
  const int64_t batch = tq.dims[0], steps = tq.dims[1], channels = tq.dims[2];
  if (a.heads <= 0 || channels % a.heads != 0)
    bad(name, "heads (" + std::to_string(a.heads) + ") must be > 0 and divide the channels (" +
                  std::to_string(channels) + ")");
  if (a.causal != 0 && a.causal != 1) bad(name, "causal must be 0 or 1");
  if (!(a.dropout >= 0 && a.dropout < 1)) bad(name, "dropout must be in [0, 1)");
  auto dims = dims_of(tq);
  auto& n = add_node(DLHOST_OP_ATTENTION, name, {q, k, v});
  n.attention = a;
  n.attention.struct_size = DLHOST_ATTENTION_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.attention;
  // Q K^T and P V, 2 T^2 d multiply-adds per head, counted over the whole square even when
  // causal (as PaLM's and Megatron's model-FLOP formulas count them); softmax 3 per score.
  const double scores = static_cast<double>(batch) * a.heads * steps * steps;
  n.node.forward_flops =
      2.0 * 2.0 * static_cast<double>(batch) * steps * steps * channels + 3.0 * scores;
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::position_embedding(const std::string& name, int32_t x,
                                         const dlhost_position_embedding_attrs& a) {
  const auto& in = checked_tensor(name, x);
  if (in.dtype != DLHOST_DTYPE_F32 || in.rank != 3)
    bad(name, "needs an F32 input [N, T, C], got " + shape_string(in));
  if (a.max_positions < in.dims[1])
    bad(name, "max_positions " + std::to_string(a.max_positions) + " is below the sequence " +
                  std::to_string(in.dims[1]));
  const int64_t channels = in.dims[2];
  auto dims = dims_of(in);
  const double count = static_cast<double>(elements(in));
  auto& n = add_node(DLHOST_OP_POSITION_EMBEDDING, name, {x});
  n.position = a;
  n.position.struct_size = DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE;
  n.node.attrs = &n.position;
  add_param(n, DLHOST_PARAM_EMBEDDING, {a.max_positions, channels}, DLHOST_INIT_UNIFORM, channels,
            a.max_positions);
  n.node.forward_flops = count;  // one add per element
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

int32_t GraphBuilder::tied_fc(const std::string& name, int32_t x, int32_t table_of,
                              const dlhost_tied_fc_attrs& a) {
  const auto& in = checked_tensor(name, x);
  const auto& emb = checked_tensor(name, table_of);
  need_f32(name, in, 2, "an F32 input [N, ..., dim]");
  const int32_t owner = emb.producer;
  if (owner < 0 || graph_->nodes_[owner].node.op != DLHOST_OP_EMBEDDING)
    bad(name, "tensor " + std::to_string(table_of) + " is not an embedding's output");
  const auto& owner_node = graph_->nodes_[owner];
  const int32_t table = owner_node.params.at(0);
  const int64_t vocab = owner_node.embedding.vocab, dim = owner_node.embedding.dim;
  if (in.dims[in.rank - 1] != dim)
    bad(name,
        "input " + shape_string(in) + " must end in the embedding's dim " + std::to_string(dim));
  if (a.has_bias != 0 && a.has_bias != 1) bad(name, "has_bias must be 0 or 1");
  auto dims = dims_of(in);
  dims.back() = vocab;
  const double rows = static_cast<double>(elements(in) / dim);
  auto& n = add_node(DLHOST_OP_TIED_FC, name, {x});
  n.tied_fc = a;
  n.tied_fc.struct_size = DLHOST_TIED_FC_ATTRS_STRUCT_SIZE;
  n.tied_fc.embedding_node = owner;
  n.node.attrs = &n.tied_fc;
  n.params.push_back(table);  // shared: param_desc.node stays the embedding's
  if (a.has_bias) add_param(n, DLHOST_PARAM_BIAS, {vocab}, DLHOST_INIT_ZERO, dim, vocab);
  n.node.forward_flops = 2.0 * rows * dim * vocab + (a.has_bias ? rows * vocab : 0.0);
  n.node.output = add_tensor(name, DLHOST_DTYPE_F32, dims);
  return n.node.output;
}

void GraphBuilder::fill_transformer_entries(dlhost_builder_api& t) {
  t.layer_norm = [](dlhost_graph_builder* b, const char* name, int32_t x,
                    const dlhost_layer_norm_attrs* a, int32_t* out) {
    return call(out, [&] {
      return unwrap(b).layer_norm(
          str(name), x, checked_attrs(a, DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE, "layer_norm", "1.4"));
    });
  };
  t.gelu = [](dlhost_graph_builder* b, const char* name, int32_t x, const dlhost_gelu_attrs* a,
              int32_t* out) {
    return call(out, [&] {
      return unwrap(b).gelu(str(name), x,
                            checked_attrs(a, DLHOST_GELU_ATTRS_STRUCT_SIZE, "gelu", "1.4"));
    });
  };
  t.attention = [](dlhost_graph_builder* b, const char* name, int32_t q, int32_t k, int32_t v,
                   const dlhost_attention_attrs* a, int32_t* out) {
    return call(out, [&] {
      return unwrap(b).attention(
          str(name), q, k, v,
          checked_attrs(a, DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, "attention", "1.4"));
    });
  };
  t.position_embedding = [](dlhost_graph_builder* b, const char* name, int32_t x,
                            const dlhost_position_embedding_attrs* a, int32_t* out) {
    return call(out, [&] {
      return unwrap(b).position_embedding(
          str(name), x,
          checked_attrs(a, DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE, "position_embedding",
                        "1.4"));
    });
  };
  t.tied_fc = [](dlhost_graph_builder* b, const char* name, int32_t x, int32_t table_of,
                 const dlhost_tied_fc_attrs* a, int32_t* out) {
    return call(out, [&] {
      return unwrap(b).tied_fc(
          str(name), x, table_of,
          checked_attrs(a, DLHOST_TIED_FC_ATTRS_STRUCT_SIZE, "tied_fc", "1.4"));
    });
  };
}

}  // namespace dlhost
