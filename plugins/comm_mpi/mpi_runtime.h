// mpi_runtime.h — what the two MPI comm plugins share: MPI's process-wide lifetime, the comm and
// request objects, the mapping of dlhost dtypes and reduce ops onto MPI's, argument checks, and
// MPI error codes turned into statuses.
//
// `mpi` (plugin_mpi.cpp) issues nonblocking collectives behind requests; `mpi_raw`
// (plugin_mpi_raw.cpp) calls the blocking MPI functions and hands back requests that are already
// complete, so `dlhost comm-bench` can show what the request machinery costs. Each library
// compiles this file into itself (hidden visibility), but both reach the same libmpi, so every
// decision about MPI's lifetime asks MPI (MPI_Initialized), never a flag of this library alone.
//
// Thread-safety: ensure_mpi() and the pure helpers are thread-safe; a comm and its requests follow
// the ABI's rule (one host thread at a time, MPI_THREAD_SERIALIZED).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "dlhost/dlhost.hpp"

// The ABI's opaque handles, defined by this plugin.
struct dlhost_comm {
  MPI_Comm comm = MPI_COMM_NULL;  // a dup of MPI_COMM_WORLD, errors returned, not fatal
  int rank = 0;
  int size = 1;
};

struct dlhost_request {
  MPI_Request request = MPI_REQUEST_NULL;
  bool done = false;
  // DLHOST_REDUCE_AVG: once the SUM completes, `avg_buffer` is divided by `world` here (MPI has
  // no averaging op).
  void* avg_buffer = nullptr;
  uint64_t avg_count = 0;
  int32_t avg_dtype = 0;
  int world = 1;
};

namespace dlhost::comm_mpi {

// Starts MPI (MPI_Init_thread, SERIALIZED) unless something in the process already did; the
// first caller that starts it also arranges MPI_Finalize at process exit. Idempotent: MPI cannot
// be initialized twice in a process, so comms come and go while MPI stays up until exit.
void ensure_mpi(const char* plugin);

// The first line of MPI_Get_library_version ("Open MPI v4.1.4, package: ..."); callable before
// MPI is initialized. Lives as long as the library.
const char* library_version();

// 1 when the MPI library accepts CUDA device buffers (Open MPI's MPIX_Query_cuda_support),
// else 0. Only meaningful once MPI is initialized; 0 before.
int32_t cuda_aware();

// Bits (1 << dlhost_dtype) of the element types the plugins accept.
uint32_t supported_dtypes();

void fill_capabilities(dlhost_comm_caps* out);

// Collective over MPI_COMM_WORLD: checks `args` against what MPI says and dups the world.
dlhost_comm* create_comm(const dlhost_comm_init_args* args, const char* plugin);
void destroy_comm(dlhost_comm* comm);

// Throws sdk::Error(INTERNAL, "<what>: <MPI_Error_string>") when rc is not MPI_SUCCESS.
void check_mpi(int rc, const char* what);

// Argument checks shared by both plugins; each throws INVALID_ARGUMENT (or UNIMPLEMENTED for a
// known dtype MPI here cannot carry) naming the call and the value.
struct Typed {
  MPI_Datatype type;
  int count;
  size_t element_size;
};
Typed check_buffer_args(const char* call, const dlhost_comm* comm, uint64_t count, int32_t dtype,
                        int32_t memory_space, dlhost_request** request);
MPI_Op check_reduce_op(const char* call, int32_t op);
void check_pointer(const char* call, const char* name, const void* p, uint64_t count);
void check_root(const char* call, const dlhost_comm* comm, int32_t root);

// Divides `count` elements of `dtype` by `world` in place (AVG = SUM / world; integer types
// truncate toward zero).
void divide_by(void* buffer, uint64_t count, int32_t dtype, int world);

// Marks a request complete and applies its AVG step.
void complete(dlhost_request* request);

// The request half of the table, the same for both plugins.
dlhost_status* test(dlhost_request* request, int32_t* done);
dlhost_status* wait(dlhost_request* request);
void request_free(dlhost_request* request);

}  // namespace dlhost::comm_mpi
