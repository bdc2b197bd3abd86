/* dlhost_backend.h — the table a compute backend plugin fills (ABI v1).
 *
 * Life of a case on a backend:
 *   device_info -> context_create(device, options) -> compile(graph, optimizer) -> model
 *   set_input (once: synthetic data stays resident) -> write_param (initial weights)
 *   repeat: forward -> backward(grad_ready) -> [host all-reduces gradients] -> update
 *   synchronize before the host stops a timer; read_loss when the host wants the value
 *   model_destroy -> context_destroy
 *
 * Threading: one context and its models are used from one host thread at a time; calls on
 * different contexts may run concurrently. device_count/device_info are thread-safe. Calls may
 * return before device work ends (GPU backends); synchronize waits for it. A CPU backend may run
 * synchronously, then synchronize is a no-op.
 *
 * Memory: compile allocates everything a step needs (activations, gradients, optimizer state,
 * workspaces); forward/backward/update allocate nothing.
 */
#ifndef DLHOST_BACKEND_H
#define DLHOST_BACKEND_H

#include "dlhost/dlhost_abi.h"
#include "dlhost/dlhost_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlhost_context dlhost_context; /* backend-owned: a device opened for a case */
typedef struct dlhost_model dlhost_model;     /* backend-owned: a compiled training graph */

typedef enum dlhost_device_kind { DLHOST_DEVICE_CPU = 1, DLHOST_DEVICE_GPU = 2 } dlhost_device_kind;

/* Plugin-owned; lives as long as the library. */
typedef struct dlhost_device_info {
  size_t struct_size;
  int32_t index;
  int32_t kind;          /* dlhost_device_kind */
  const char* name;      /* "cpu0", "cuda0" */
  const char* model;     /* CPU or GPU model as the vendor names it */
  int32_t cores;         /* CPU cores, or GPU multiprocessors */
  const char* isa;       /* what the library dispatches: "avx512_core", "sm_90" */
  uint64_t memory_bytes; /* physical memory of the device */
  const char* library;   /* "oneDNN 2.6.3 (cpu_runtime=OMP)", "cuDNN 9.1.0" */
} dlhost_device_info;
#define DLHOST_DEVICE_INFO_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_device_info, library)

typedef enum dlhost_optimizer_kind {
  DLHOST_OPTIMIZER_SGD = 1 /* v = momentum * v + (g + weight_decay * w); w -= lr * v */
} dlhost_optimizer_kind;

/* Host-owned; borrowed for the call (the backend copies what it keeps). */
typedef struct dlhost_optimizer_desc {
  size_t struct_size;
  int32_t kind; /* dlhost_optimizer_kind */
  float learning_rate;
  float momentum;     /* 0 = plain SGD */
  float weight_decay; /* L2 added to the gradient, on every parameter */
  float clip_norm;    /* 0 = off; else gradients scaled so their global L2 norm <= clip_norm */
} dlhost_optimizer_desc;
#define DLHOST_OPTIMIZER_DESC_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_optimizer_desc, clip_norm)

/* Called by backward each time a parameter's gradient is final (on a GPU: its producing work is
 * enqueued on the stream the comm layer will be told about), in reverse layer order. The host
 * uses it to start gradient all-reduce while backward goes on. Borrowed for the backward call;
 * `fn` must not call back into the backend. */
typedef struct dlhost_grad_ready {
  size_t struct_size;
  void* user;
  void (*fn)(void* user, int32_t param);
} dlhost_grad_ready;
#define DLHOST_GRAD_READY_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_grad_ready, fn)

/* Filled by the backend into a caller-owned struct; strings live as long as the model. */
typedef struct dlhost_model_info {
  size_t struct_size;
  int32_t threads;            /* threads the backend really uses for this model */
  const char* implementation; /* e.g. the primitive implementations chosen, one line */
  uint64_t param_bytes;       /* parameters as stored by the backend */
  uint64_t workspace_bytes;   /* activations, gradients, optimizer state, scratch */
} dlhost_model_info;
#define DLHOST_MODEL_INFO_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_model_info, workspace_bytes)

typedef enum dlhost_param_part { DLHOST_PARAM_VALUE = 1, DLHOST_PARAM_GRAD = 2 } dlhost_param_part;

typedef struct dlhost_backend_api {
  size_t struct_size;

  /* Devices. Thread-safe. */
  int32_t (*device_count)(void);
  dlhost_status* (*device_info)(int32_t device, const dlhost_device_info** out);

  /* Opens a device for one case. Options the host always sets: "threads" (CPU threads to use,
   * "0" = the backend's default), "seed". Unknown options are ignored (logged at debug). */
  dlhost_status* (*context_create)(int32_t device, const dlhost_options* options,
                                   dlhost_context** out);
  void (*context_destroy)(dlhost_context* context);

  /* Builds every primitive and allocates every buffer for training `graph` at its mini-batch with
   * `optimizer`. UNIMPLEMENTED when an op or attribute is not supported (the message names it).
   * The graph is borrowed for the call. The model must be destroyed before its context. */
  dlhost_status* (*compile)(dlhost_context* context, const dlhost_graph* graph,
                            const dlhost_optimizer_desc* optimizer, const dlhost_options* options,
                            dlhost_model** out);
  void (*model_destroy)(dlhost_model* model);
  dlhost_status* (*model_info)(dlhost_model* model, dlhost_model_info* out);

  /* Copies host data into an input tensor (one of graph.inputs) of exactly
   * batch * per-sample elements; `data` is borrowed for the call. */
  dlhost_status* (*set_input)(dlhost_model* model, int32_t tensor, const void* data, size_t bytes);

  /* One training step, in three calls. forward computes every activation and the loss. backward
   * computes every gradient (overwriting, not accumulating) and calls `ready` (may be NULL) per
   * parameter as its gradient is final. update applies the optimizer to every parameter from the
   * gradient buffers as they are then (the host may have averaged them across ranks). */
  dlhost_status* (*forward)(dlhost_model* model);
  dlhost_status* (*backward)(dlhost_model* model, const dlhost_grad_ready* ready);
  dlhost_status* (*update)(dlhost_model* model);

  /* Waits until all work submitted for the model has finished. May block. */
  dlhost_status* (*synchronize)(dlhost_model* model);

  /* The loss of the last forward. Synchronizes. */
  dlhost_status* (*read_loss)(dlhost_model* model, float* loss);

  /* The buffers of a parameter and its gradient, for all-reduce and broadcast in place. The
   * layout inside may be the backend's own (the same on every rank of one backend); `bytes` is
   * what a collective must cover. Valid until model_destroy. */
  dlhost_status* (*param_buffers)(dlhost_model* model, int32_t param, dlhost_buffer* value,
                                  dlhost_buffer* grad);

  /* Copies a parameter or its gradient in the canonical layout (dlhost_graph.h) to or from host
   * memory of exactly count * 4 bytes. Synchronizes. */
  dlhost_status* (*read_param)(dlhost_model* model, int32_t param, int32_t part, void* data,
                               size_t bytes);
  dlhost_status* (*write_param)(dlhost_model* model, int32_t param, int32_t part, const void* data,
                                size_t bytes);

  /* Bytes of memory the model holds on its device now. */
  dlhost_status* (*memory_in_use)(dlhost_model* model, uint64_t* bytes);
} dlhost_backend_api;
#define DLHOST_BACKEND_API_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_backend_api, memory_in_use)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLHOST_BACKEND_H */
