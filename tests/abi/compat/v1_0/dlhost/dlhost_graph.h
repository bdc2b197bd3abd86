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
 *   [out_channels]. A backend may keep any internal layout (blocked formats) as long as it
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
  DLHOST_OP_MSE_LOSS = 7               /* loss: sum((x - target)^2) / number of elements */
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
  DLHOST_INIT_HE_NORMAL = 4       /* N(0, 2 / fan_in) */
} dlhost_param_init;

typedef enum dlhost_param_role { DLHOST_PARAM_WEIGHT = 1, DLHOST_PARAM_BIAS = 2 } dlhost_param_role;

/* --- op attributes (each starts with struct_size) ------------------------------------------ */

typedef struct dlhost_fc_attrs {
  size_t struct_size;
  int64_t out_features;
  int32_t has_bias; /* 0 or 1 */
} dlhost_fc_attrs;
#define DLHOST_FC_ATTRS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_fc_attrs, has_bias)

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
  /* `labels` is an I32 input of per-sample rank 0 holding class ids in [0, classes). */
  dlhost_status* (*softmax_cross_entropy)(dlhost_graph_builder* b, const char* name, int32_t logits,
                                          int32_t labels, int32_t* out);
  /* `target` has the shape of `prediction` (an autoencoder passes its data input). */
  dlhost_status* (*mse_loss)(dlhost_graph_builder* b, const char* name, int32_t prediction,
                             int32_t target, int32_t* out);
} dlhost_builder_api;
#define DLHOST_BUILDER_API_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_builder_api, mse_loss)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLHOST_GRAPH_H */
