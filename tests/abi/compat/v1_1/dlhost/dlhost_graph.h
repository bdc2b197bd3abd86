/* dlhost_graph.h — the graph a network plugin builds and a backend compiles (ABI v1).
 *
 * The host owns the graph IR. A network plugin describes its layers through the builder table
 * (dlhost_builder_api) the host hands it; the host infers and checks every shape, creates the
 * parameter tensors with their canonical layouts, counts parameters and FLOPs. A backend receives
 * a read-only view (dlhost_graph) with every shape already resolved for one mini-batch size.
 *
 * Conventions:
 * - Tensor ids are int32_t indices into dlhost_graph.tensors; parameter ids index
 *   dlhost_graph.params. Images are NCHW; dims[0] of every activation is the mini-batch.
 * - Canonical parameter layouts (what read_param/write_param exchange, row-major):
 *   fully connected weight [out, in] where `in` flattens the input's C*H*W in NCHW order, bias
 *   [out]; convolution weight [out_channels, in_channels/groups, kernel_h, kernel_w], bias
 *   [out_channels]; ABI 1.1 adds batch-norm scale/shift [C], the LSTM's per-layer weight
 *   [4H, C_in], weight_iter [4H, H] and bias [4H] (gate blocks i, f, g, o), and the embedding
 *   table [vocab, dim]. A backend may keep any internal layout (blocked formats) as long as it
 *   converts at read/write.
 * - Arrays of structs are passed as arrays of pointers, so a struct can grow without changing
 *   the stride a reader compiled against.
 * - New ops are appended to dlhost_op with their own attribute struct and builder function; a
 *   backend that meets an op it does not know returns UNIMPLEMENTED from compile.
 */
#ifndef DLHOST_GRAPH_H
#define DLHOST_GRAPH_H

#include "dlhost/dlhost_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DLHOST_MAX_RANK 8

typedef enum dlhost_op {
  DLHOST_OP_INPUT = 1,                 /* a tensor the host feeds: data or labels */
  DLHOST_OP_FC = 2,                    /* fully connected (inner product): y = x W^T + b */
  DLHOST_OP_CONV2D = 3,                /* 2-D convolution (cross-correlation) */
  DLHOST_OP_POOL2D = 4,                /* max or average pooling */
  DLHOST_OP_ACTIVATION = 5,            /* element-wise activation */
  DLHOST_OP_SOFTMAX_CROSS_ENTROPY = 6, /* loss: mean over the batch of -log softmax(x)[label] */
  DLHOST_OP_MSE_LOSS = 7,              /* loss: sum((x - target)^2) / number of elements */
  /* ABI 1.1 */
  DLHOST_OP_BATCH_NORM = 8,      /* training-mode batch normalization over N(HW) per channel */
  DLHOST_OP_DROPOUT = 9,         /* inverted dropout with the mask of dlhost_dropout_keep() */
  DLHOST_OP_ADD = 10,            /* element-wise sum of two tensors of one shape (residuals) */
  DLHOST_OP_LRN = 11,            /* local response normalization across channels */
  DLHOST_OP_EMBEDDING = 12,      /* I32 ids [N, T] -> rows of a [vocab, dim] table: [N, T, dim] */
  DLHOST_OP_LSTM = 13,           /* multi-layer LSTM over a sequence, [N, T, C] -> [N, T, H] */
  DLHOST_OP_GLOBAL_AVG_POOL = 14 /* [N, C, H, W] -> [N, C], the mean over H x W */
} dlhost_op;

typedef enum dlhost_activation_kind {
  DLHOST_ACTIVATION_RELU = 1,
  DLHOST_ACTIVATION_SIGMOID = 2,
  DLHOST_ACTIVATION_TANH = 3
} dlhost_activation_kind;

typedef enum dlhost_pool_kind { DLHOST_POOL_MAX = 1, DLHOST_POOL_AVG = 2 } dlhost_pool_kind;

/* How the host initializes a parameter before the first step (seeded, identical on every
 * backend and rank). */
typedef enum dlhost_param_init {
  DLHOST_INIT_ZERO = 1,
  DLHOST_INIT_ONE = 2,
  DLHOST_INIT_XAVIER_UNIFORM = 3, /* U(-a, a), a = sqrt(6 / (fan_in + fan_out)) */
  DLHOST_INIT_HE_NORMAL = 4,      /* N(0, 2 / fan_in) */
  /* ABI 1.1 */
  DLHOST_INIT_UNIFORM = 5 /* U(-a, a), a = 1 / sqrt(fan_in) (PyTorch's rule for LSTMs) */
} dlhost_param_init;

typedef enum dlhost_param_role {
  DLHOST_PARAM_WEIGHT = 1,
  DLHOST_PARAM_BIAS = 2,
  /* ABI 1.1 */
  DLHOST_PARAM_SCALE = 3,       /* batch-norm gamma [C] */
  DLHOST_PARAM_SHIFT = 4,       /* batch-norm beta [C] */
  DLHOST_PARAM_WEIGHT_ITER = 5, /* LSTM recurrent weight [4H, H] of one layer */
  DLHOST_PARAM_EMBEDDING = 6    /* embedding table [vocab, dim] */
} dlhost_param_role;

/* --- op attributes (each starts with struct_size) ------------------------------------------ */

typedef struct dlhost_fc_attrs {
  size_t struct_size;
  int64_t out_features;
  int32_t has_bias; /* 0 or 1 */
  /* ABI 1.1. Leading dimensions kept as they are; the rest is flattened into the features.
   * 1 (and the default when the field is absent): [N, ...] -> [N, out]. 2: a per-time-step
   * layer, [N, T, C] -> [N, T, out]. */
  int32_t batch_dims;
} dlhost_fc_attrs;
#define DLHOST_FC_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_fc_attrs, batch_dims)
#define DLHOST_FC_ATTRS_STRUCT_SIZE_1_0 DLHOST_STRUCT_SIZE(dlhost_fc_attrs, has_bias)

typedef struct dlhost_conv2d_attrs {
  size_t struct_size;
  int64_t out_channels;
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w;     /* >= 1 */
  int64_t pad_h, pad_w;           /* symmetric zero padding */
  int64_t dilation_h, dilation_w; /* 1 = dense kernel (PyTorch's convention) */
  int64_t groups;                 /* 1 = ordinary convolution */
  int32_t has_bias;
} dlhost_conv2d_attrs;
#define DLHOST_CONV2D_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_conv2d_attrs, has_bias)

typedef struct dlhost_pool2d_attrs {
  size_t struct_size;
  int32_t kind; /* dlhost_pool_kind */
  int64_t kernel_h, kernel_w;
  int64_t stride_h, stride_w;
  int64_t pad_h, pad_w;
  /* 0: output = floor((in + 2 pad - k) / s) + 1; 1: ceil (Caffe), the extra window clipped to
   * the padded input as Caffe and PyTorch do. */
  int32_t ceil_mode;
  /* Average pooling only: 1 divides by the full window (Caffe), 0 by the valid elements. */
  int32_t count_include_pad;
} dlhost_pool2d_attrs;
#define DLHOST_POOL2D_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_pool2d_attrs, count_include_pad)

typedef struct dlhost_activation_attrs {
  size_t struct_size;
  int32_t kind; /* dlhost_activation_kind */
} dlhost_activation_attrs;
#define DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_activation_attrs, kind)

/* --- ABI 1.1 ops --- */

/* Training mode: normalizes with the mini-batch's mean and biased variance per channel, then
 * y = scale * x_hat + shift. The running statistics (state of the backend, not parameters, never
 * all-reduced) follow running = (1 - momentum) * running + momentum * batch (unbiased variance),
 * as PyTorch does. Parameters: scale [C] (init ONE), shift [C] (init ZERO). Input rank 2 or 4. */
typedef struct dlhost_batch_norm_attrs {
  size_t struct_size;
  float epsilon;  /* 1e-5 */
  float momentum; /* 0.1 */
} dlhost_batch_norm_attrs;
#define DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_batch_norm_attrs, momentum)

/* Inverted dropout: element i of the tensor is kept, and scaled by 1 / (1 - probability), when
 * dlhost_dropout_keep(seed, node, step, i, probability) is true. `seed` is the case's "seed"
 * option, `node` the node's index, `step` the number of forward calls made on the model before
 * this one. Every backend uses this mask, so results are comparable across backends. */
typedef struct dlhost_dropout_attrs {
  size_t struct_size;
  float probability; /* of dropping, in [0, 1) */
} dlhost_dropout_attrs;
#define DLHOST_DROPOUT_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_dropout_attrs, probability)

/* splitmix64 finalizer over (seed, node, step, index): cheap, stateless, easy on a GPU. */
static inline uint64_t dlhost_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static inline int dlhost_dropout_keep(uint64_t seed, uint32_t node, uint64_t step, uint64_t index,
                                      float probability) {
  uint64_t h =
      dlhost_mix64(dlhost_mix64(dlhost_mix64(seed ^ ((uint64_t)node << 32)) ^ step) ^ index);
  /* the top 24 bits as a uniform number in [0, 1) */
  return (float)(h >> 40) * (1.0f / 16777216.0f) >= probability;
}

/* Across channels (AlexNet's, Caffe's ACROSS_CHANNELS):
 * y = x / (k + alpha / size * sum over the `size` channels centred on c of x^2)^beta. */
typedef struct dlhost_lrn_attrs {
  size_t struct_size;
  int64_t size; /* odd */
  float alpha, beta, k;
} dlhost_lrn_attrs;
#define DLHOST_LRN_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_lrn_attrs, k)

/* Parameter: table [vocab, dim] (role EMBEDDING, init UNIFORM with fan_in = dim). The input is an
 * I32 input of ids in [0, vocab), [N, T]; no gradient flows into ids. */
typedef struct dlhost_embedding_attrs {
  size_t struct_size;
  int64_t vocab;
  int64_t dim;
} dlhost_embedding_attrs;
#define DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_embedding_attrs, dim)

/* A stack of `layers` unidirectional LSTM layers of `hidden` units over the whole sequence, the
 * initial hidden and cell states zero at every step. Input [N, T, C] (batch first), output the
 * last layer's hidden states [N, T, hidden]. Gates in the order i, f, g (cell candidate), o:
 *   i,f,o = sigmoid(W_x x_t + W_h h_{t-1} + b), g = tanh(...), c_t = f c_{t-1} + i g,
 *   h_t = o tanh(c_t).
 * Parameters per layer l, in this order: weight [4H, C_l] (WEIGHT), weight_iter [4H, H]
 * (WEIGHT_ITER), bias [4H] (BIAS), C_0 = C and C_l = H after; all init UNIFORM with fan_in = H.
 * One bias per layer (PyTorch's b_ih + b_hh collapse into it). */
typedef struct dlhost_lstm_attrs {
  size_t struct_size;
  int64_t hidden;
  int64_t layers;
} dlhost_lstm_attrs;
#define DLHOST_LSTM_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_lstm_attrs, layers)

/* --- the graph view a backend compiles ---------------------------------------------------- */

typedef struct dlhost_tensor_desc {
  size_t struct_size;
  int32_t id;
  int32_t dtype; /* dlhost_dtype */
  int32_t rank;
  int64_t dims[DLHOST_MAX_RANK]; /* dims[0] is the mini-batch; a loss is rank 0 */
  const char* name;              /* lives as long as the graph */
  int32_t producer;              /* index of the node that writes it */
} dlhost_tensor_desc;
#define DLHOST_TENSOR_DESC_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_tensor_desc, producer)

typedef struct dlhost_param_desc {
  size_t struct_size;
  int32_t id;
  int32_t node; /* the node that owns it */
  int32_t role; /* dlhost_param_role */
  int32_t init; /* dlhost_param_init */
  int32_t rank;
  int64_t dims[DLHOST_MAX_RANK]; /* canonical layout, see the top of this file */
  int64_t count;                 /* number of elements */
  int64_t fan_in, fan_out;       /* what the initializer used */
  const char* name;              /* "<node>.weight", "<node>.bias"; lives as long as the graph */
} dlhost_param_desc;
#define DLHOST_PARAM_DESC_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_param_desc, name)

typedef struct dlhost_node {
  size_t struct_size;
  int32_t op; /* dlhost_op */
  const char* name;
  int32_t num_inputs;
  const int32_t* inputs; /* tensor ids; for losses: {prediction, labels or target} */
  int32_t output;        /* tensor id */
  int32_t num_params;
  const int32_t* params; /* parameter ids: weight, then bias when present */
  const void* attrs;     /* dlhost_<op>_attrs matching `op`; NULL for INPUT and losses */
  double forward_flops;  /* per mini-batch, multiply-add counted as 2 */
} dlhost_node;
#define DLHOST_NODE_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_node, forward_flops)

/* Everything here is host-owned and lives until the backend's compile call returns; a backend
 * that needs names or shapes later copies them. */
typedef struct dlhost_graph {
  size_t struct_size;
  const char* network; /* network name */
  int64_t batch;       /* the mini-batch size the shapes were resolved for */
  int32_t num_tensors;
  const dlhost_tensor_desc* const* tensors; /* index == id */
  int32_t num_nodes;
  const dlhost_node* const* nodes; /* topological order */
  int32_t num_params;
  const dlhost_param_desc* const* params; /* index == id */
  int32_t num_inputs;
  const int32_t* inputs; /* tensor ids the host feeds through set_input */
  int32_t loss;          /* tensor id of the scalar loss */
} dlhost_graph;
#define DLHOST_GRAPH_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_graph, loss)

/* --- the builder a network plugin calls ---------------------------------------------------- */

/* Opaque, host-owned; valid only during dlhost_network_api.build. */
typedef struct dlhost_graph_builder dlhost_graph_builder;

/* Every function checks its arguments and the shapes it infers; on error it returns a status
 * naming the layer and the shapes, and the graph is unusable. `name` is copied and must be unique
 * in the graph. `per_sample_dims` excludes the mini-batch. Not thread-safe: one builder, one
 * thread. */
typedef struct dlhost_builder_api {
  size_t struct_size;
  dlhost_status* (*input)(dlhost_graph_builder* b, const char* name, int32_t dtype, int32_t rank,
                          const int64_t* per_sample_dims, int32_t* out);
  dlhost_status* (*fc)(dlhost_graph_builder* b, const char* name, int32_t x,
                       const dlhost_fc_attrs* attrs, int32_t* out);
  dlhost_status* (*conv2d)(dlhost_graph_builder* b, const char* name, int32_t x,
                           const dlhost_conv2d_attrs* attrs, int32_t* out);
  dlhost_status* (*pool2d)(dlhost_graph_builder* b, const char* name, int32_t x,
                           const dlhost_pool2d_attrs* attrs, int32_t* out);
  dlhost_status* (*activation)(dlhost_graph_builder* b, const char* name, int32_t x,
                               const dlhost_activation_attrs* attrs, int32_t* out);
  /* `logits` is [N, ..., classes]; `labels` an I32 input of the logits' shape without the last
   * dimension (one class id per position; per-sample rank 0 for a classifier, [T] for a
   * language model), ids in [0, classes). The loss is the mean over all positions. */
  dlhost_status* (*softmax_cross_entropy)(dlhost_graph_builder* b, const char* name, int32_t logits,
                                          int32_t labels, int32_t* out);
  /* `target` has the shape of `prediction` (an autoencoder passes its data input). */
  dlhost_status* (*mse_loss)(dlhost_graph_builder* b, const char* name, int32_t prediction,
                             int32_t target, int32_t* out);
  /* ABI 1.1 */
  dlhost_status* (*batch_norm)(dlhost_graph_builder* b, const char* name, int32_t x,
                               const dlhost_batch_norm_attrs* attrs, int32_t* out);
  dlhost_status* (*dropout)(dlhost_graph_builder* b, const char* name, int32_t x,
                            const dlhost_dropout_attrs* attrs, int32_t* out);
  dlhost_status* (*add)(dlhost_graph_builder* b, const char* name, int32_t x, int32_t y,
                        int32_t* out);
  dlhost_status* (*lrn)(dlhost_graph_builder* b, const char* name, int32_t x,
                        const dlhost_lrn_attrs* attrs, int32_t* out);
  dlhost_status* (*embedding)(dlhost_graph_builder* b, const char* name, int32_t ids,
                              const dlhost_embedding_attrs* attrs, int32_t* out);
  dlhost_status* (*lstm)(dlhost_graph_builder* b, const char* name, int32_t x,
                         const dlhost_lstm_attrs* attrs, int32_t* out);
  dlhost_status* (*global_avg_pool)(dlhost_graph_builder* b, const char* name, int32_t x,
                                    int32_t* out);
} dlhost_builder_api;
#define DLHOST_BUILDER_API_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_builder_api, global_avg_pool)
#define DLHOST_BUILDER_API_STRUCT_SIZE_1_0 DLHOST_STRUCT_SIZE(dlhost_builder_api, mse_loss)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLHOST_GRAPH_H */
