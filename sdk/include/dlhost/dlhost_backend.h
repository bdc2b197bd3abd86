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
  DLHOST_OPTIMIZER_SGD = 1, /* v = momentum * v + (g + weight_decay * w); w -= lr * v */
  /* ABI 1.4. AdamW (Loshchilov & Hutter; PyTorch's torch.optim.AdamW), t = 1, 2, ... the number
   * of update calls so far, m and v zero before the first:
   *   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
   *   w -= lr * weight_decay * w    (decoupled: not added to g, not scaled by the moments)
   *   w -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + epsilon)
   * on every parameter; momentum is not used. A backend lists the kinds it implements in its
   * capabilities (dlhost_backend_caps.optimizers); one that does not is SKIPPED for AdamW. */
  DLHOST_OPTIMIZER_ADAMW = 2
} dlhost_optimizer_kind;

/* Host-owned; borrowed for the call (the backend copies what it keeps). */
typedef struct dlhost_optimizer_desc {
  size_t struct_size;
  int32_t kind; /* dlhost_optimizer_kind */
  float learning_rate;
  float momentum;     /* 0 = plain SGD */
  float weight_decay; /* L2 added to the gradient, on every parameter */
  float clip_norm;    /* 0 = off; else gradients scaled so their global L2 norm <= clip_norm */
  /* The order of update(), as cpu_reference does it: (1) clipping: scale = min(1, clip_norm /
   * ||g||), the norm over every parameter's raw gradient, weight decay not included; (2) weight
   * decay: step = scale * g + weight_decay * w; (3) momentum: v = momentum * v + step, step = v;
   * (4) w -= learning_rate * step. cpu_kit.hpp's sdk::clip_scale and sdk::sgd_step do this. */
  /* ABI 1.4: AdamW's (read only when kind is ADAMW; PyTorch's defaults 0.9, 0.999, 1e-8) */
  float beta1;
  float beta2;
  float epsilon;
} dlhost_optimizer_desc;
#define DLHOST_OPTIMIZER_DESC_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_optimizer_desc, epsilon)
#define DLHOST_OPTIMIZER_DESC_STRUCT_SIZE_1_0 DLHOST_STRUCT_SIZE(dlhost_optimizer_desc, clip_norm)

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

/* Filled by the backend into a caller-owned struct; strings live as long as the model. The host
 * sets struct_size; the backend fills only the fields it covers and never writes struct_size. */
typedef struct dlhost_model_info {
  size_t struct_size;
  int32_t threads;            /* threads the backend really uses for this model */
  const char* implementation; /* e.g. the primitive implementations chosen, one line */
  uint64_t param_bytes;       /* parameters as stored by the backend */
  uint64_t workspace_bytes;   /* activations, gradients, optimizer state, scratch */
  /* 1.5: 1 when this model does the step's work across the three calls otherwise than they say
   * (it took the host's compile option "fused_step": forward, backward and update are then not a
   * breakdown of the step, and `ready` may not be called), 0 when each call does its own phase,
   * the option given or not. The host reads it only from a plugin built against minor 5 or
   * later; an older plugin given the option is taken as fused. */
  int32_t fused_step;
  /* 1.5: where this model knowingly takes another path than the framework it lowers to gives
   * that framework's own users (what its performance guide or its layers do), and is faster for
   * it: one departure a line, "what: the cause, its measured size and where it was measured".
   * NULL or "" when none is known. Only departures the compiled graph has (a network without
   * batch norm has none of batch norm's). The report marks the model's figures with them. The
   * host reads it only from a plugin built against minor 5 or later. */
  const char* departures;
} dlhost_model_info;
#define DLHOST_MODEL_INFO_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_model_info, departures)
#define DLHOST_MODEL_INFO_STRUCT_SIZE_1_0 DLHOST_STRUCT_SIZE(dlhost_model_info, workspace_bytes)

typedef enum dlhost_param_part { DLHOST_PARAM_VALUE = 1, DLHOST_PARAM_GRAD = 2 } dlhost_param_part;

typedef struct dlhost_backend_api {
  size_t struct_size;

  /* Devices. Thread-safe. */
  int32_t (*device_count)(void);
  dlhost_status* (*device_info)(int32_t device, const dlhost_device_info** out);

  /* Opens a device for one case. Options the host always sets: "threads" (CPU threads to use,
   * "0" = the backend's default), "seed"; from 1.2 also "precision" (dlhost_device.h) and, for
   * fp16, "loss_scale". A 1.2 plugin that declares its options (DLHOST_EXT_OPTION_SCHEMA) gets
   * only declared and host-set keys: the host refuses the rest before the case starts. */
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
   * gradient buffers as they are then (the host may have averaged them across ranks).
   * From 1.4 the host may pass the compile option "fused_step" = "1": nothing reads or changes
   * the gradient buffers between backward and update (one rank, no comm, no gradient hook). A
   * plugin that sees it may do the whole step's work in any one of the three calls (the others
   * then return at once); the host still makes all three calls in order, and `ready` may then
   * not be called. The host never passes it to a plugin built against a minor below 4. */
  dlhost_status* (*forward)(dlhost_model* model);
  dlhost_status* (*backward)(dlhost_model* model, const dlhost_grad_ready* ready);
  dlhost_status* (*update)(dlhost_model* model);

  /* Waits until all work submitted for the model has finished. May block. */
  dlhost_status* (*synchronize)(dlhost_model* model);

  /* The loss of the last forward. Synchronizes. */
  dlhost_status* (*read_loss)(dlhost_model* model, float* loss);

  /* The buffers of a parameter and its gradient, for all-reduce and broadcast in place. The
   * layout inside may be the backend's own (the same on every rank of one backend); `bytes` is
   * what a collective must cover. Valid until model_destroy. The host sets struct_size of both
   * caller-owned structs; the backend fills only the fields that struct_size covers and never
   * writes struct_size. */
  dlhost_status* (*param_buffers)(dlhost_model* model, int32_t param, dlhost_buffer* value,
                                  dlhost_buffer* grad);

  /* Copies a parameter or its gradient in the canonical layout (dlhost_graph.h) to or from host
   * memory of exactly count * (size of the parameter's dtype) bytes (count * 4 for F32: the only
   * parameter dtype before 1.2; with a mixed precision mode the master weights stay F32).
   * Synchronizes. */
  dlhost_status* (*read_param)(dlhost_model* model, int32_t param, int32_t part, void* data,
                               size_t bytes);
  dlhost_status* (*write_param)(dlhost_model* model, int32_t param, int32_t part, const void* data,
                                size_t bytes);

  /* Bytes of memory the model holds on its device now. */
  dlhost_status* (*memory_in_use)(dlhost_model* model, uint64_t* bytes);
} dlhost_backend_api;
#define DLHOST_BACKEND_API_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_backend_api, memory_in_use)
#define DLHOST_BACKEND_API_STRUCT_SIZE_1_0 DLHOST_STRUCT_SIZE(dlhost_backend_api, memory_in_use)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLHOST_BACKEND_H */
