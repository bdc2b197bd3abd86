/* dlhost_comm.h — the table a communication plugin fills (ABI v1): collectives between the ranks
 * of a data-parallel case (MPI, NCCL, ...).
 *
 * A comm is created on every rank with the same world and a shared rendezvous store (the host's
 * key-value store, reached through dlhost_host_api.store_set/store_get). Collectives are
 * asynchronous: each returns a request that the host tests or waits on, then frees. Collectives
 * must be issued in the same order on every rank.
 *
 * Threading: one comm is used from one host thread at a time (MPI_THREAD_SERIALIZED semantics);
 * test/wait may block the calling thread, never the others.
 */
#ifndef DLHOST_COMM_H
#define DLHOST_COMM_H

#include "dlhost/dlhost_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlhost_comm dlhost_comm;       /* plugin-owned communicator */
typedef struct dlhost_request dlhost_request; /* plugin-owned pending collective */

typedef enum dlhost_reduce_op {
  DLHOST_REDUCE_SUM = 1,
  DLHOST_REDUCE_AVG = 2, /* sum divided by world size */
  DLHOST_REDUCE_MAX = 3,
  DLHOST_REDUCE_MIN = 4
} dlhost_reduce_op;

/* Borrowed for init; the plugin copies what it keeps. */
typedef struct dlhost_comm_init_args {
  size_t struct_size;
  int32_t rank;
  int32_t world_size;
  int32_t local_rank; /* rank among the ranks of this node */
  int32_t local_size;
  int32_t device; /* device index the rank's backend uses; -1 on CPU */
  const dlhost_options* options;
  const dlhost_extension* extensions; /* e.g. a CUDA stream to order against (future) */
} dlhost_comm_init_args;
#define DLHOST_COMM_INIT_ARGS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_comm_init_args, extensions)

/* Filled by the plugin into a caller-owned struct; strings live as long as the library. */
typedef struct dlhost_comm_caps {
  size_t struct_size;
  int32_t host_memory;   /* accepts DLHOST_MEMORY_HOST buffers */
  int32_t device_memory; /* accepts DLHOST_MEMORY_DEVICE buffers (CUDA-aware) */
  uint32_t dtypes;       /* bit (1 << dlhost_dtype) per supported element type */
  const char* library;   /* "Open MPI v4.1.4", "NCCL 2.28.3" */
} dlhost_comm_caps;
#define DLHOST_COMM_CAPS_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_comm_caps, library)

typedef struct dlhost_comm_api {
  size_t struct_size;
  dlhost_status* (*capabilities)(dlhost_comm_caps* out);

  /* Collective over all ranks; may block until every rank has called it. */
  dlhost_status* (*init)(const dlhost_comm_init_args* args, dlhost_comm** out);
  void (*finalize)(dlhost_comm* comm);

  /* `send` may equal `recv` (in place). Buffers are borrowed until the request completes. */
  dlhost_status* (*all_reduce)(dlhost_comm* comm, const void* send, void* recv, uint64_t count,
                               int32_t dtype, int32_t op, int32_t memory_space,
                               dlhost_request** request);
  dlhost_status* (*broadcast)(dlhost_comm* comm, void* buffer, uint64_t count, int32_t dtype,
                              int32_t root, int32_t memory_space, dlhost_request** request);
  /* `recv` holds world_size * count elements, rank r's block at r * count. */
  dlhost_status* (*all_gather)(dlhost_comm* comm, const void* send, void* recv, uint64_t count,
                               int32_t dtype, int32_t memory_space, dlhost_request** request);
  dlhost_status* (*barrier)(dlhost_comm* comm, dlhost_request** request);

  /* *done = 1 when complete. An error of the collective is returned by test or wait. */
  dlhost_status* (*test)(dlhost_request* request, int32_t* done);
  dlhost_status* (*wait)(dlhost_request* request);
  void (*request_free)(dlhost_request* request);
} dlhost_comm_api;
#define DLHOST_COMM_API_STRUCT_SIZE DLHOST_STRUCT_SIZE(dlhost_comm_api, request_free)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLHOST_COMM_H */
