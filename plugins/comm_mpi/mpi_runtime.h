// mpi_runtime.h — what the two MPI comm plugins share, on the SDK's comm kit (comm_kit.hpp): MPI's
// process-wide lifetime, the communicator both plugins' comms own, the request of a nonblocking
// collective, the mapping of dlhost dtypes and reduce ops onto MPI's, argument checks, and MPI
// error codes turned into sdk::Error.
//
// `mpi` (plugin_mpi.cpp) issues nonblocking collectives behind MpiRequests; `mpi_raw`
// (plugin_mpi_raw.cpp) calls the blocking MPI functions and hands back completed requests, so
// `dlhost comm-bench` can show what the request machinery costs. Each library compiles this file
// into itself (hidden visibility), but both reach the same libmpi, so every decision about MPI's
// lifetime asks MPI (MPI_Initialized), never a flag of this library alone.
//
// Thread-safety: ensure_mpi() and the pure helpers are thread-safe; a comm and its requests follow
// the ABI's rule (one host thread at a time, MPI_THREAD_SERIALIZED).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlhost/comm_kit.hpp"

namespace dlhost::comm_mpi {

// Starts MPI (MPI_Init_thread, SERIALIZED) unless something in the process already did; the
// first caller that starts it also arranges MPI_Finalize at process exit and selects libnbc's
// ring all-reduce (kIallreduceAlgorithmVariable) unless the environment chose one. Idempotent: MPI
// cannot be initialized twice in a process, so comms come and go while MPI stays up until exit.
void ensure_mpi(const char* plugin);

// The MCA parameter, as an environment variable, that chooses libnbc's MPI_Iallreduce
// algorithm; ensure_mpi() sets it to the ring before MPI starts unless it is set (Open MPI only).
constexpr const char* kIallreduceAlgorithmVariable = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";

// The first line of MPI_Get_library_version ("Open MPI v4.1.4, package: ..."); callable before
// MPI is initialized. Lives as long as the library.
const char* library_version();

// 1 when the MPI library accepts CUDA device buffers, else 0. Before MPI is initialized the answer
// is the build's (Open MPI's MPIX_CUDA_AWARE_SUPPORT in mpi-ext.h): the host asks it to skip a
// `comm_memory: device` case before any rank starts, and must not start MPI to ask. Once MPI
// runs, MPIX_Query_cuda_support() says whether that support is on in this process.
int32_t cuda_aware();

// Why cuda_aware() says what it says, for messages: "built without CUDA support
// (MPIX_CUDA_AWARE_SUPPORT is 0 in mpi-ext.h)" and the like.
std::string cuda_support_text();

// Throws sdk::Error(INTERNAL, "<what>: <MPI_Error_string>") when rc is not MPI_SUCCESS.
void check_mpi(int rc, const char* what);

// An element type as MPI carries it.
struct Typed {
  MPI_Datatype type;
  int count;
  size_t element_size;
};

// Both plugins' communicator: a dup of MPI_COMM_WORLD (errors returned, not fatal) and the
// argument checks of every collective. Subclasses issue the collectives.
class MpiComm : public sdk::Comm {
 public:
  // Collective over MPI_COMM_WORLD: checks `args` against what MPI says and dups the world.
  MpiComm(const dlhost_comm_init_args& args, const char* plugin);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

 protected:
  // Each throws INVALID_ARGUMENT (or UNIMPLEMENTED for a known dtype MPI here cannot carry)
  // naming the call and the value.
  Typed check_buffer(const char* call, uint64_t count, int32_t dtype, int32_t memory_space) const;
  // Every argument of an all-reduce; *mpi_op gets MPI's op (SUM for AVG).
  Typed check_all_reduce(const void* send, const void* recv, uint64_t count, int32_t dtype,
                         int32_t op, int32_t memory_space, MPI_Op* mpi_op) const;
  static MPI_Op check_reduce_op(const char* call, int32_t op);
  static void check_pointer(const char* call, const char* name, const void* p, uint64_t count);
  void check_root(const char* call, int32_t root) const;
  // MPI_IN_PLACE when an all-gather's `send` already sits at this rank's slot of `recv`.
  const void* gather_source(const void* send, const void* recv, uint64_t count,
                            const Typed& t) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

// Divides `count` elements of `dtype` by `world` in place (AVG = SUM / world; integer types
// truncate toward zero).
void divide_by(void* buffer, uint64_t count, int32_t dtype, int world);

// A nonblocking collective. For DLHOST_REDUCE_AVG, once the SUM completes the buffer is divided
// by the world size here (MPI has no averaging op). Destroying a pending request waits for it:
// MPI may not free an active collective request, and the buffers it borrows must outlive it.
class MpiRequest final : public sdk::Request {
 public:
  MpiRequest() = default;
  MpiRequest(void* avg_buffer, uint64_t avg_count, int32_t avg_dtype, int world)
      : avg_buffer_(avg_buffer), avg_count_(avg_count), avg_dtype_(avg_dtype), world_(world) {}
  ~MpiRequest() override;
  MPI_Request* handle() { return &request_; }
  bool test() override;
  void wait() override;

 private:
  void complete();
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
  void* avg_buffer_ = nullptr;
  uint64_t avg_count_ = 0;
  int32_t avg_dtype_ = 0;
  int world_ = 1;
};

// The plugin half both share: capabilities and the library's version. Subclasses say their
// priority and make their comm.
class MpiPlugin : public sdk::CommPlugin {
 public:
  sdk::CommCaps capabilities() const override;
  std::string library() const override { return library_version(); }
  // Neither reads an option: MPI is configured by mpirun (MCA parameters), not by the suite.
  std::optional<std::vector<sdk::OptionSpec>> options() const override { return sdk::no_options(); }
};

}  // namespace dlhost::comm_mpi
