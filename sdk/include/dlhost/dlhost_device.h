/* dlhost_device.h — ABI 1.2: what a backend for an accelerator (or any asynchronous backend)
 * exposes beyond the 1.1 tables, and what a comm needs to work on its memory, as typed extensions
 * in the PJRT manner.
 *
 * Every structure here is an extension: it starts with dlhost_extension's three fields
 * (struct_size, type, next) and hangs in the plugin's `dlhost_plugin.extensions` chain (or, for
 * dlhost_comm_stream_ext, in `dlhost_comm_init_args.extensions`). The host walks the chain and
 * uses what it finds; an absent extension is a valid answer and the host falls back to 1.1
 * behaviour (host clock timing, host-memory collectives, no option check). A plugin compiled
 * against 1.1 simply has none of them.
 *
 * Streams and events. A backend whose calls return before the device work ends (the 1.1 backend
 * table already allows it) says so in its capabilities and exports:
 * - the stream of a model (DLHOST_EXT_STREAM): the one in-order queue every call on that model
 *   enqueues to. A comm that is handed this stream orders its collectives on it, so the host
 *   never has to drain the device between backward, the all-reduce and update.
 * - events (DLHOST_EXT_EVENTS): recorded on the model's stream after everything enqueued so far;
 *   the time between two completed events is the device time between those points. The host
 *   times a step with events, and synchronizes once per step, not once per phase.
 *
 * Device memory. Buffers in DLHOST_MEMORY_DEVICE are never read or written by the host directly:
 * the host asks the backend to copy (DLHOST_EXT_DEVICE_MEMORY). The same extension reports
 * memory statistics (in use, peak, free, total), allocates device buffers for comm-bench and
 * gradient arenas, copies device to device on the stream, and pinned host memory for per-step
 * input uploads.
 *
 * Ownership and lifetimes are stated on every field; extension tables themselves are
 * plugin-owned and live as long as the library. Threading is as in dlhost_backend.h: calls on a
 * model come from one host thread at a time, except where said.
 */
#ifndef DLHOST_DEVICE_H
#define DLHOST_DEVICE_H

#include "dlhost/dlhost_abi.h"
#include "dlhost/dlhost_backend.h"
#include "dlhost/dlhost_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registered extension types (dlhost_extension.type). Allocated here only; never reused. */
typedef enum dlhost_extension_type {
  DLHOST_EXT_BACKEND_CAPS = 1,  /* dlhost_backend_caps_ext, in a backend's plugin chain */
  DLHOST_EXT_STREAM = 2,        /* dlhost_stream_ext, in a backend's plugin chain */
  DLHOST_EXT_EVENTS = 3,        /* dlhost_events_ext, in a backend's plugin chain */
  DLHOST_EXT_DEVICE_MEMORY = 4, /* dlhost_device_memory_ext, in a backend's plugin chain */
  DLHOST_EXT_OPTION_SCHEMA = 5, /* dlhost_option_schema_ext, in any plugin's chain */
  DLHOST_EXT_COMM_STREAM = 6,   /* dlhost_comm_stream_ext, in dlhost_comm_init_args.extensions */
  DLHOST_EXT_COMM_GROUP = 7,    /* dlhost_comm_group_ext, in a comm's plugin chain */
  DLHOST_EXT_COMM_ABORT = 8,    /* dlhost_comm_abort_ext, in a comm's plugin chain */
  DLHOST_EXT_TENSOR_READ = 9,   /* dlhost_tensor_read_ext, in a backend's plugin chain (1.3) */
  DLHOST_EXT_TOOL_RUNTIME = 10, /* dlhost_tool_runtime_ext, in a backend's plugin chain (1.5) */
  DLHOST_EXT_STEP_LOOP = 11     /* dlhost_step_loop_ext, in a backend's plugin chain (1.5) */
} dlhost_extension_type;

/* ---------------------------------------------------------------------------------------------
 * Precision of a model's arithmetic. The host passes the case's mode to context_create and
 * compile as the option "precision" (one of the names below) and, for FP16, "loss_scale" (a
 * float; "0" = dynamic). A backend lists the modes it implements in its capabilities; the host
 * records a case whose mode the backend lacks as SKIPPED (UNIMPLEMENTED), and a backend without
 * capabilities is taken to implement FP32 alone. */
typedef enum dlhost_precision {
  DLHOST_PRECISION_FP32 = 1, /* "fp32": strict IEEE single precision, no TF32 (the paper's) */
  DLHOST_PRECISION_TF32 = 2, /* "tf32": fp32 storage, TF32 tensor-core products */
  DLHOST_PRECISION_BF16 = 3, /* "bf16": bf16 products, fp32 master weights and accumulation */
  DLHOST_PRECISION_FP16 = 4  /* "fp16": fp16 products, fp32 master weights, loss scaling */
} dlhost_precision;

/* ---------------------------------------------------------------------------------------------
 * Capabilities of a backend, readable without opening a device or compiling. */
typedef struct dlhost_backend_caps {
  size_t struct_size;
  /* dlhost_op values the backend compiles; borrowed, lives as long as the library. */
  const int32_t* ops;
  int32_t op_count;
  uint32_t dtypes;        /* bit (1 << dlhost_dtype) per element type of tensors it accepts */
  uint32_t precisions;    /* bit (1 << dlhost_precision) per mode it implements */
  uint32_t memory_spaces; /* bit (1 << dlhost_memory_space) where its param/grad buffers live */
  /* 1 when forward/backward/update/set_input may return before the device work ends (then the
   * backend must export DLHOST_EXT_STREAM and DLHOST_EXT_EVENTS); 0 for a synchronous backend. */
  int32_t asynchronous;
  /* ABI 1.4: bit (1 << dlhost_optimizer_kind) per optimizer update implements; absent (an older
   * backend) means SGD alone. */
  uint32_t optimizers;
} dlhost_backend_caps;
#define DLHOST_BACKEND_CAPS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_backend_caps, optimizers)

typedef struct dlhost_backend_caps_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_BACKEND_CAPS */
  const dlhost_extension* next;
  /* Fills a caller-owned struct (the caller sets struct_size). Thread-safe; no device touched. */
  dlhost_status* (*capabilities)(dlhost_backend_caps* out);
} dlhost_backend_caps_ext;
#define DLHOST_BACKEND_CAPS_EXT_STRUCT_SIZE \
  DLHOST_STRUCT_SIZE(dlhost_backend_caps_ext, capabilities)

/* ---------------------------------------------------------------------------------------------
 * Streams. */
typedef enum dlhost_stream_kind {
  DLHOST_STREAM_CUDA = 1,      /* handle is a cudaStream_t */
  DLHOST_STREAM_HOST_QUEUE = 2 /* handle is a dlhost_host_queue* (below): a worker thread's queue */
} dlhost_stream_kind;

/* A CPU stand-in for a device stream, so asynchronous backends and stream-ordered comms can be
 * written and tested without a GPU (dlhost's device-path fixtures use it). `enqueue` runs `fn`
 * on the queue's thread after everything enqueued before it; thread-safe; the queue lives as
 * long as the model that exported it. */
typedef struct dlhost_host_queue {
  size_t struct_size;
  void* self;
  void (*enqueue)(void* self, void (*fn)(void* arg), void* arg);
} dlhost_host_queue;
#define DLHOST_HOST_QUEUE_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_host_queue, enqueue)

/* Filled by the backend into a caller-owned struct; `handle` lives as long as the model. */
typedef struct dlhost_stream {
  size_t struct_size;
  int32_t kind;   /* dlhost_stream_kind */
  int32_t device; /* device index of the stream's backend */
  void* handle;   /* see dlhost_stream_kind */
} dlhost_stream;
#define DLHOST_STREAM_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_stream, handle)

typedef struct dlhost_stream_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_STREAM */
  const dlhost_extension* next;
  /* The stream every call on `model` enqueues to. */
  dlhost_status* (*model_stream)(dlhost_model* model, dlhost_stream* out);
} dlhost_stream_ext;
#define DLHOST_STREAM_EXT_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_stream_ext, model_stream)

/* ---------------------------------------------------------------------------------------------
 * Events on a model's stream. */
typedef struct dlhost_event dlhost_event; /* backend-owned; destroyed before its model */

typedef struct dlhost_events_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_EVENTS */
  const dlhost_extension* next;
  dlhost_status* (*event_create)(dlhost_model* model, dlhost_event** out);
  void (*event_destroy)(dlhost_event* event); /* accepts NULL */
  /* Records the event after all work enqueued on the model's stream so far. Does not block. */
  dlhost_status* (*event_record)(dlhost_event* event);
  /* *done = 1 when the work before the record has finished. Does not block. */
  dlhost_status* (*event_query)(dlhost_event* event, int32_t* done);
  /* Blocks until the work before the record has finished. */
  dlhost_status* (*event_synchronize)(dlhost_event* event);
  /* Milliseconds of device time between two finished events of one model's stream (FAILED
   * PRECONDITION when either has not finished or was never recorded). */
  dlhost_status* (*event_elapsed_ms)(dlhost_event* start, dlhost_event* end, double* ms);
} dlhost_events_ext;
#define DLHOST_EVENTS_EXT_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_events_ext, event_elapsed_ms)

/* ---------------------------------------------------------------------------------------------
 * Device memory: statistics, buffers for the host's own use (comm-bench, gradient arenas), copies,
 * pinned host memory. */
typedef struct dlhost_memory_stats {
  size_t struct_size;
  uint64_t in_use_bytes; /* held by the model now */
  uint64_t peak_bytes;   /* the most it held since compile */
  uint64_t free_bytes;   /* free on the device now (0 when unknown) */
  uint64_t total_bytes;  /* the device's memory */
} dlhost_memory_stats;
#define DLHOST_MEMORY_STATS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_memory_stats, total_bytes)

typedef struct dlhost_device_memory_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_DEVICE_MEMORY */
  const dlhost_extension* next;
  /* Fills a caller-owned struct. Synchronizes nothing: numbers of the allocator, not of work. */
  dlhost_status* (*memory_stats)(dlhost_model* model, dlhost_memory_stats* out);
  /* A device buffer of `bytes` on the context's device, for the host's own use. `out` is
   * caller-owned and filled (data, bytes, dtype, memory_space = DEVICE, device). Allocation is
   * slow: the host allocates before timing and never inside a step. */
  dlhost_status* (*buffer_alloc)(dlhost_context* context, uint64_t bytes, int32_t dtype,
                                 dlhost_buffer* out);
  void (*buffer_free)(dlhost_context* context, const dlhost_buffer* buffer); /* accepts NULL */
  /* Copies between a device buffer (from a model or buffer_alloc) and host memory, ordered on the
   * model's stream when `model` is not NULL (else on the context's default queue), and waits for
   * the copy. `offset` and `bytes` are in bytes; host memory is borrowed for the call. */
  dlhost_status* (*copy_to_host)(dlhost_context* context, dlhost_model* model,
                                 const dlhost_buffer* src, uint64_t offset, void* dst,
                                 uint64_t bytes);
  dlhost_status* (*copy_from_host)(dlhost_context* context, dlhost_model* model, const void* src,
                                   const dlhost_buffer* dst, uint64_t offset, uint64_t bytes);
  /* Page-locked host memory for fast uploads (set_input of a per-step upload reads it); free
   * with host_free. Backends without pinning may return ordinary memory. */
  dlhost_status* (*host_alloc)(dlhost_context* context, uint64_t bytes, void** out);
  void (*host_free)(dlhost_context* context, void* ptr); /* accepts NULL */
  /* Copies `bytes` between two device buffers of the model's context (from the model or
   * buffer_alloc; they may not overlap), ordered on the model's stream, and returns without
   * waiting: work enqueued after it sees the copy. What the host packs gradients into a flat
   * all-reduce arena with, so no gradient is read before the work that writes it. */
  dlhost_status* (*copy_device)(dlhost_model* model, const dlhost_buffer* src, uint64_t src_offset,
                                const dlhost_buffer* dst, uint64_t dst_offset, uint64_t bytes);
  /* Fills a caller-owned struct with the device buffer that holds input tensor `tensor` of
   * `model` (valid as long as the model): a per-step upload copies the batch into it with
   * copy_from_host, from host_alloc'ed memory. */
  dlhost_status* (*input_buffer)(dlhost_model* model, int32_t tensor, dlhost_buffer* out);
} dlhost_device_memory_ext;
#define DLHOST_DEVICE_MEMORY_EXT_STRUCT_SIZE \
  DLHOST_STRUCT_SIZE(dlhost_device_memory_ext, input_buffer)

/* ---------------------------------------------------------------------------------------------
 * The options a plugin reads, declared so that the host can list them (`dlhost plugins -v`) and
 * refuse an unknown or mistyped one naming the plugin and the option. Host-set keys (threads,
 * seed, precision, loss_scale) are not declared. */
typedef enum dlhost_option_type {
  DLHOST_OPTION_BOOL = 1,   /* "true"/"false"/"1"/"0" */
  DLHOST_OPTION_INT = 2,    /* a decimal integer */
  DLHOST_OPTION_FLOAT = 3,  /* a decimal number */
  DLHOST_OPTION_STRING = 4, /* anything */
  DLHOST_OPTION_ENUM = 5    /* one of `choices` */
} dlhost_option_type;

/* Plugin-owned; strings live as long as the library. */
typedef struct dlhost_option_decl {
  size_t struct_size;
  const char* name;          /* [a-z0-9_] */
  int32_t type;              /* dlhost_option_type */
  const char* default_value; /* as text; NULL when the option has no default */
  const char* help;          /* one line */
  const char* choices;       /* DLHOST_OPTION_ENUM: "a|b|c"; DLHOST_OPTION_INT: NULL or
                                "MIN..MAX", the inclusive range the plugin accepts (the host
                                refuses a value outside it at load; an older host ignores it) */
} dlhost_option_decl;
#define DLHOST_OPTION_DECL_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_option_decl, choices)

typedef struct dlhost_option_schema_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_OPTION_SCHEMA */
  const dlhost_extension* next;
  int32_t count;
  const dlhost_option_decl* const*
      options; /* count pointers (arrays of pointers: a decl may grow) */
} dlhost_option_schema_ext;
#define DLHOST_OPTION_SCHEMA_EXT_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_option_schema_ext, options)

/* ---------------------------------------------------------------------------------------------
 * Comm on device memory. The host hands a comm the stream of the rank's model in
 * dlhost_comm_init_args.extensions. A comm that accepts it orders every collective on that
 * stream: the collective starts after the work enqueued on the stream before the call and work
 * enqueued after the call sees its result. Its request is then complete as soon as the collective
 * is ordered on the stream (test/wait do not wait for the device); the host reads a result in
 * host memory only after synchronizing the stream (an event). Without this extension, or for a
 * comm that ignores it, a request completes when the data is in place, as in 1.1. */
typedef struct dlhost_comm_stream_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_COMM_STREAM */
  const dlhost_extension* next;
  dlhost_stream stream; /* borrowed for init; the handle lives as long as the comm */
} dlhost_comm_stream_ext;
#define DLHOST_COMM_STREAM_EXT_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_comm_stream_ext, stream)

/* Collectives issued between group_start and group_end are launched together (NCCL's group
 * calls): their requests complete only after group_end. */
typedef struct dlhost_comm_group_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_COMM_GROUP */
  const dlhost_extension* next;
  dlhost_status* (*group_start)(dlhost_comm* comm);
  dlhost_status* (*group_end)(dlhost_comm* comm);
} dlhost_comm_group_ext;
#define DLHOST_COMM_GROUP_EXT_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_comm_group_ext, group_end)

/* Ends every pending collective of `comm` with ABORTED, so that a rank whose peer died is never
 * left waiting. The one call that may come from another thread than the comm's user (the host's
 * watchdog); after it, only request_free and finalize may be called. */
typedef struct dlhost_comm_abort_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_COMM_ABORT */
  const dlhost_extension* next;
  void (*abort)(dlhost_comm* comm);
} dlhost_comm_abort_ext;
#define DLHOST_COMM_ABORT_EXT_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_comm_abort_ext, abort)

/* ---------------------------------------------------------------------------------------------
 * ABI 1.3: the value of a tensor after a forward, for the host's evaluation on a test split
 * (`evaluate: true`: test accuracy from the logits, the input of softmax_cross_entropy). */
typedef struct dlhost_tensor_read_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_TENSOR_READ */
  const dlhost_extension* next;
  /* Copies the F32 value of graph tensor `tensor` (a node's output, or an input) as the last
   * forward left it, in the tensor's canonical row-major layout (its dims, innermost last), into
   * host memory of exactly its element count * 4 bytes; `data` is borrowed for the call.
   * INVALID_ARGUMENT for another size or a non-F32 tensor; UNIMPLEMENTED for a tensor the backend
   * does not keep (e.g. computed in place and overwritten). Synchronizes. */
  dlhost_status* (*read_tensor)(dlhost_model* model, int32_t tensor, void* data, size_t bytes);
} dlhost_tensor_read_ext;
#define DLHOST_TENSOR_READ_EXT_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_tensor_read_ext, read_tensor)

/* ---------------------------------------------------------------------------------------------
 * ABI 1.5: the tool's own distributed runtime (issue 41). A case may name, as its comm, a runtime
 * a backend owns (`comm: torch_ddp`: PyTorch's DistributedDataParallel over c10d). The host then
 * starts no comm plugin and does no all-reduce of its own: it launches the ranks and serves the
 * rendezvous store as for any multi-rank case, and hands each rank's model to the runtime, which
 * makes every step's `update` see gradients averaged over the ranks (synchronous data
 * parallelism), or says otherwise in `mode`. A backend without this extension, or whose
 * `runtime_query` refuses the name, has the case SKIPPED with the reason. Such a case's
 * `compile` gets the host-set option "tool_runtime" = the runtime's name (a model may be built
 * otherwise for it, e.g. with every gradient through the framework's own autograd hooks). */

/* What a process is to the runtime: a worker (a rank that trains: dlhost's own rank), or an
 * extra role the runtime needs beside its workers, which dlhost starts for the case (each in a
 * process of its own, `dlhost runtime-role`, on a test host of its own where the case has test
 * hosts) when `runtime_roles` asks for it, and runs through `runtime_serve`. */
typedef enum dlhost_runtime_role {
  DLHOST_RUNTIME_WORKER = 1,
  DLHOST_RUNTIME_PARAMETER_SERVER = 2, /* TensorFlow's ps task, MXNet's (ps-lite's) server */
  DLHOST_RUNTIME_SCHEDULER = 3         /* MXNet's (ps-lite's) scheduler */
} dlhost_runtime_role;
/* The length of runtime_roles' `counts`: indexed by dlhost_runtime_role, room for roles to come. */
#define DLHOST_RUNTIME_ROLE_LIMIT 8

/* Host-owned; borrowed for runtime_attach (the backend copies what it keeps). */
typedef struct dlhost_tool_runtime_args {
  size_t struct_size;
  const char* runtime; /* the case's comm, one of the extension's `runtimes` */
  int32_t rank;        /* 0 .. world_size - 1: the host's rank (the launcher's) */
  int32_t world_size;
  int32_t role; /* dlhost_runtime_role */
  /* Every store key the runtime sets or reads starts with this (dlhost_host_api.store_set,
   * store_get: the case's rendezvous store, shared by every rank; a runtime publishes its own
   * addresses and ports there). Lives for the call. */
  const char* store_prefix;
  /* The address this rank's listeners bind and peers reach it at ("127.0.0.1" on one machine,
   * the test host's address under test hosts). */
  const char* host;
  int64_t timeout_ms; /* the longest any wait for a peer may block (the case's startup limit) */
  const dlhost_options* options; /* the case's options for the backend, as compile had them */
  /* Every process of the job and where it listens, when the runtime has extra roles
   * (runtime_roles gave one or more), else NULL: roles separated by ';', each "NAME=" and its
   * processes' "ADDRESS:PORT" separated by ',' in index order; NAME is "worker" (workers by
   * rank), "ps" (DLHOST_RUNTIME_PARAMETER_SERVER) or "scheduler"; a role without processes is
   * left out. E.g. "worker=127.0.0.1:40101,127.0.0.1:40102;ps=127.0.0.1:40103". The host picks
   * every port (free when picked) so that every process knows every address up front
   * (TensorFlow's ServerDef needs them): the process at that place listens on it. Lives for the
   * call. */
  const char* cluster;
  /* The case's optimizer, as compile had it (a parameter server that applies the update needs
   * it); borrowed for the call. */
  const dlhost_optimizer_desc* optimizer;
} dlhost_tool_runtime_args;
#define DLHOST_TOOL_RUNTIME_ARGS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_tool_runtime_args, optimizer)

/* Filled by the backend into a host-owned struct (the host sets struct_size; the backend fills
 * only the fields it covers). Strings live as long as the model. */
typedef struct dlhost_tool_runtime_info {
  size_t struct_size;
  const char* mode;    /* "sync" (gradients averaged before every update) or "async" */
  const char* library; /* e.g. "c10d ProcessGroupGloo (libtorch 2.15.0)" */
  /* What runtime_comm_times measures, one line; NULL when the runtime does not expose its
   * communication time, and then `no_comm_time` says why (the host records that reason: a
   * missing time is never a zero). */
  const char* comm_time;
  const char* no_comm_time;
} dlhost_tool_runtime_info;
#define DLHOST_TOOL_RUNTIME_INFO_STRUCT_SIZE \
  DLHOST_STRUCT_SIZE(dlhost_tool_runtime_info, no_comm_time)

typedef struct dlhost_tool_runtime_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_TOOL_RUNTIME */
  const dlhost_extension* next;
  /* The runtimes this backend owns, comma-separated ("torch_ddp"); lives as long as the
   * library. */
  const char* runtimes;
  /* NULL when `runtime` can run with this build of the backend; else a status (UNIMPLEMENTED)
   * whose message says why not, e.g. a library whose version lacks the API. Thread-safe. */
  dlhost_status* (*runtime_query)(const char* runtime);
  /* Joins this rank's compiled model to the runtime, after compile and before the first step;
   * blocks until every rank has joined or args->timeout_ms passes (DEADLINE_EXCEEDED). The
   * runtime may make the parameters equal on every rank here (rank 0's win). From then on,
   * backward (or update) communicates. The runtime ends with the model. */
  dlhost_status* (*runtime_attach)(dlhost_model* model, const dlhost_tool_runtime_args* args,
                                   dlhost_tool_runtime_info* info);
  /* The communication time of every step since attach, oldest first, in milliseconds (as
   * info.comm_time says): writes min(capacity, steps) values to `ms` and the number of steps to
   * *count. UNIMPLEMENTED when the runtime exposes none. */
  dlhost_status* (*runtime_comm_times)(dlhost_model* model, double* ms, size_t capacity,
                                       size_t* count);
  /* The extra roles `runtime` needs beside `workers` workers with these options (the case's for
   * the backend): counts[role] processes of each dlhost_runtime_role, in an array of
   * DLHOST_RUNTIME_ROLE_LIMIT the host zeroed (counts[DLHOST_RUNTIME_WORKER] is not read). NULL
   * (the function): workers only. A status (INVALID_ARGUMENT) for options it refuses: the case
   * FAILS with it. Called by dlhost before it starts the case. Thread-safe; no model. */
  dlhost_status* (*runtime_roles)(const char* runtime, int32_t workers,
                                  const dlhost_options* options, int32_t* counts);
  /* Runs one process of an extra role, in a process dlhost started for it and nothing else (no
   * model is compiled there): args->role and args->rank (its index among that role's
   * processes), world_size (the workers), cluster, options, optimizer, store_prefix (the same
   * store as the workers'), host, timeout_ms. Blocks until the job is over and returns NULL, or
   * a status: the case then ends FAILED naming the role. It may also never return (a server
   * that cannot stop): dlhost ends the process (SIGTERM, then SIGKILL) once the ranks are done. A
   * process that exits or dies while the ranks run ends the case, named. NULL when
   * runtime_roles is. */
  dlhost_status* (*runtime_serve)(const dlhost_tool_runtime_args* args);
} dlhost_tool_runtime_ext;
#define DLHOST_TOOL_RUNTIME_EXT_STRUCT_SIZE \
  DLHOST_STRUCT_SIZE(dlhost_tool_runtime_ext, runtime_serve)

/* ---------------------------------------------------------------------------------------------
 * ABI 1.5: a backend whose tool owns its training loop (issue 42: BigDL's optimize() runs every
 * step itself; called once per step it costs 0.2-1.3 s of set-up around ~55 ms of work, which no
 * BigDL user pays). With this extension the host trains a case without a comm in ONE call over
 * the warm-up and timed steps, and the step times are the tool's own clock, as its users get
 * them: the record's `timing.timer` is then "backend_clock", with the backend's lines saying what
 * was timed and how the steps ran. The step calls (forward, backward, update) still work one at a
 * time for everything else (conform, data parallelism, a comm). The host's per-step checks (the
 * case's time limit, a non-finite loss) apply after the call; the case's watchdog bounds it. */

/* Host-owned; borrowed for run_steps. */
typedef struct dlhost_owned_steps {
  size_t struct_size;
  int64_t warmup;     /* untimed steps first */
  int64_t iterations; /* then the timed steps */
  /* NULL when the inputs are resident: set with set_input before the call, the same for every
   * step. Else the host's: sets the inputs of step `step` (0 .. warmup + iterations - 1) with
   * set_input on this model, then returns NULL or a status that run_steps returns as it is. The
   * backend calls it once per step, in order, before that step and outside every step's time
   * (it may call it for every step before its loop starts). */
  dlhost_status* (*feed)(void* user, int64_t step);
  void* feed_user;
  /* Written by the backend: step_ms[i], the time of timed step i by the tool's own clock
   * (`iterations` values); loss[i], the loss of step i, warm-up steps first (warmup + iterations
   * values). */
  double* step_ms;
  float* loss;
  /* Host-owned, `iterations` values the host sets to NaN; written by a backend whose tool times
   * the compute of a step apart from the step (BigDL's DistriOptimizer: its "computing time
   * average", the executors' forward and backward): compute_ms[i], that of timed step i by the
   * tool's clock. Left as it is by a tool that does not split its step. (1.5, after loss: check
   * struct_size.) */
  double* compute_ms;
} dlhost_owned_steps;
#define DLHOST_OWNED_STEPS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_owned_steps, compute_ms)

/* Filled by the backend into a host-owned struct (the host sets struct_size; the backend fills
 * only the fields it covers). Strings live as long as the model. */
typedef struct dlhost_owned_steps_info {
  size_t struct_size;
  /* What step_ms measures, one line ("LocalOptimizer's own iteration time: ...") */
  const char* clock;
  /* How the steps ran, one line ("one LocalOptimizer.optimize() over 25 steps, 1 core") */
  const char* loop;
} dlhost_owned_steps_info;
#define DLHOST_OWNED_STEPS_INFO_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_owned_steps_info, loop)

typedef struct dlhost_step_loop_ext {
  size_t struct_size;
  int32_t type; /* DLHOST_EXT_STEP_LOOP */
  const dlhost_extension* next;
  /* Trains `model` for steps->warmup + steps->iterations steps in the tool's own loop, each on
   * the inputs steps->feed set (or the resident ones), with the compiled optimizer; blocks until
   * done. Afterwards the parameters and read_loss are those after the last step. */
  dlhost_status* (*run_steps)(dlhost_model* model, const dlhost_owned_steps* steps,
                              dlhost_owned_steps_info* info);
} dlhost_step_loop_ext;
#define DLHOST_STEP_LOOP_EXT_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_step_loop_ext, run_steps)

/* Finds the extension of `type` in a chain, or NULL. A reader then checks struct_size against
 * the part it needs. */
static inline const dlhost_extension* dlhost_find_extension(const dlhost_extension* chain,
                                                            int32_t type) {
  for (; chain != NULL; chain = chain->next)
    if (chain->type == type) return chain;
  return NULL;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLHOST_DEVICE_H */
