// mpi_runtime.cpp — MPI's lifetime, the shared communicator and its argument checks, dtype/op
// mapping and the nonblocking request of the `mpi` and `mpi_raw` comm plugins (see mpi_runtime.h).
#include "mpi_runtime.h"

#include <climits>
#include <cstdlib>
#include <memory>
#include <mutex>

#if defined(OPEN_MPI) && OPEN_MPI && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

namespace dlhost::comm_mpi {
namespace {

namespace sdk = dlhost::sdk;

// Registered only by the library that called MPI_Init_thread. Plugins are never unloaded, so
// the function is still mapped when exit() runs it; it must not log (spdlog may be gone).
void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "unknown";
  }
}

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS)
    return "MPI error code " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(length));
}

template <class T>
void divide_typed(void* buffer, uint64_t count, int world) {
  T* x = static_cast<T*>(buffer);
  // A division, not a multiplication by 1/world: the result is the correctly rounded mean of
  // the exact sum, which is what a checker computes too.
  const T n = static_cast<T>(world);
  for (uint64_t i = 0; i < count; ++i) x[i] /= n;
}

// Open MPI 4.1 serves MPI_Iallreduce with libnbc, whose default takes its binomial algorithm (a
// binomial-tree reduce to rank 0, then a binomial broadcast, the whole message every round) on
// fewer than 4 ranks and for every in-place call, which is how data parallelism calls it: on one
// link that is 2 x the message in sequence at 2 ranks (each direction idle half the time), 4 x at
// 4, against the ring's 2 (N-1)/N x with both directions busy, what Gloo and NCCL run. So the
// ring is selected (MCA parameters are read from the environment when MPI starts), unless the
// user chose one: `mpirun --mca coll_libnbc_iallreduce_algorithm X` and `-x` put it in the
// environment too, and a value there wins. Measured: docs/comm-bench.md.
void select_iallreduce_algorithm() {
#if defined(OPEN_MPI) && OPEN_MPI
  setenv(kIallreduceAlgorithmVariable, "ring", /*overwrite=*/0);
#endif
}

}  // namespace

void ensure_mpi(const char* plugin) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
              std::string(plugin) +
                  ": MPI was already finalized in this process and cannot be started again");
  if (initialized) {
    // Someone else (the other MPI plugin, or an application embedding dlhost) owns MPI; use it
    // as it is, and say so when its thread level is weaker than the ABI assumes.
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED)
      sdk::log(DLHOST_LOG_WARN, plugin,
               std::string("MPI was initialized by someone else at ") +
                   thread_level_name(provided) +
                   "; collectives from a thread other than the one that initialized it are unsafe");
    return;
  }
  select_iallreduce_algorithm();
  // SERIALIZED is what the ABI promises callers (one thread at a time, not always the same one).
  int provided = MPI_THREAD_SINGLE;
  int argc = 0;
  char** argv = nullptr;
  check_mpi(MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  std::atexit(finalize_at_exit);
  if (provided < MPI_THREAD_SERIALIZED)
    sdk::log(DLHOST_LOG_WARN, plugin,
             std::string("MPI_Init_thread asked for MPI_THREAD_SERIALIZED and got ") +
                 thread_level_name(provided) +
                 ": call collectives from the thread that created the first comm");
  else
    sdk::log(DLHOST_LOG_DEBUG, plugin,
             std::string("MPI initialized at ") + thread_level_name(provided) + "; " +
                 cuda_support_text());
}

const char* library_version() {
  static const std::string version = [] {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return std::string("MPI");
    std::string all(text, static_cast<size_t>(length));
    auto newline = all.find('\n');
    return newline == std::string::npos ? all : all.substr(0, newline);
  }();
  return version.c_str();
}

namespace {

// Whether MPI runs in this process now (initialized and not finalized): only then does
// MPIX_Query_cuda_support() answer for this process. Unused where the build has no CUDA.
[[maybe_unused]] bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

int32_t cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return !mpi_running() || MPIX_Query_cuda_support() ? 1 : 0;
#else
  return 0;
#endif
}

std::string cuda_support_text() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  if (!mpi_running()) return "built with CUDA support (MPIX_CUDA_AWARE_SUPPORT is 1 in mpi-ext.h)";
  return MPIX_Query_cuda_support() ? "CUDA support on (MPIX_Query_cuda_support() is 1)"
                                   : "built with CUDA support, but it is off in this process "
                                     "(MPIX_Query_cuda_support() is 0)";
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  return "built without CUDA support (MPIX_CUDA_AWARE_SUPPORT is 0 in mpi-ext.h)";
#else
  return "no CUDA support known: the mpi-ext.h it was built against has no "
         "MPIX_CUDA_AWARE_SUPPORT (not Open MPI, or its cuda extension left out)";
#endif
}

sdk::CommCaps MpiPlugin::capabilities() const {
  sdk::CommCaps caps;
  caps.host_memory = true;
  caps.device_memory = cuda_aware() != 0;
  // Open MPI 4.1 has no standard 16-bit float type (MPI_BFLOAT16 / MPIX_C_FLOAT16 are not in
  // its headers), so F16 and BF16 are not offered rather than emulated.
  caps.dtypes = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_F64) | (1u << DLHOST_DTYPE_I32) |
                (1u << DLHOST_DTYPE_I64);
  return caps;
}

MpiComm::MpiComm(const dlhost_comm_init_args& args, const char* plugin) {
  if (args.world_size < 1 || args.rank < 0 || args.rank >= args.world_size)
    sdk::invalid("init: rank " + std::to_string(args.rank) + " of world size " +
                 std::to_string(args.world_size) + " is not a rank of that world");
  // MPI takes its ranks from the launcher (mpirun, srun), not from the host's store; the host's
  // numbers must agree with MPI's, or collectives would pair the wrong processes.
  ensure_mpi(plugin);
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  if (rank != args.rank || size != args.world_size)
    sdk::invalid("init: the host says rank " + std::to_string(args.rank) + " of " +
                 std::to_string(args.world_size) + " but MPI says rank " + std::to_string(rank) +
                 " of " + std::to_string(size) +
                 (size == 1 ? " (MPI sees no launcher; under srun, pass --mpi=pmix)"
                            : " (two launchers disagree?)"));
  // A private communicator: dlhost's collectives never match messages of other MPI users in the
  // process, and its error handler can return errors instead of aborting.
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  rank_ = rank;
  size_ = size;
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS)
    sdk::fail(DLHOST_CODE_INTERNAL, std::string(what) + ": " + error_string(rc));
}

Typed MpiComm::check_buffer(const char* call, uint64_t count, int32_t dtype,
                            int32_t memory_space) const {
  std::string c(call);
  if (count > static_cast<uint64_t>(INT_MAX))
    sdk::invalid(c + ": count " + std::to_string(count) + " exceeds MPI's int count limit (" +
                 std::to_string(INT_MAX) + ")");
  if (memory_space == DLHOST_MEMORY_DEVICE) {
    if (!cuda_aware())
      sdk::invalid(c + ": device memory given, but " + library_version() +
                   " is not CUDA-aware here (host memory only): " + cuda_support_text());
  } else if (memory_space != DLHOST_MEMORY_HOST) {
    sdk::invalid(c + ": unknown memory space " + std::to_string(memory_space));
  }
  Typed t{MPI_DATATYPE_NULL, static_cast<int>(count), 0};
  switch (dtype) {
    case DLHOST_DTYPE_F32:
      t.type = MPI_FLOAT;
      t.element_size = 4;
      break;
    case DLHOST_DTYPE_F64:
      t.type = MPI_DOUBLE;
      t.element_size = 8;
      break;
    case DLHOST_DTYPE_I32:
      t.type = MPI_INT32_T;
      t.element_size = 4;
      break;
    case DLHOST_DTYPE_I64:
      t.type = MPI_INT64_T;
      t.element_size = 8;
      break;
    case DLHOST_DTYPE_F16:
    case DLHOST_DTYPE_BF16:
      sdk::unimplemented(c + ": " + library_version() +
                         " has no standard 16-bit float type (F16/BF16); use F32");
    default:
      sdk::invalid(c + ": unknown dtype " + std::to_string(dtype));
  }
  return t;
}

Typed MpiComm::check_all_reduce(const void* send, const void* recv, uint64_t count, int32_t dtype,
                                int32_t op, int32_t memory_space, MPI_Op* mpi_op) const {
  Typed t = check_buffer("all_reduce", count, dtype, memory_space);
  *mpi_op = check_reduce_op("all_reduce", op);
  check_pointer("all_reduce", "send", send, count);
  check_pointer("all_reduce", "recv", recv, count);
  return t;
}

MPI_Op MpiComm::check_reduce_op(const char* call, int32_t op) {
  switch (op) {
    case DLHOST_REDUCE_SUM:
    case DLHOST_REDUCE_AVG:  // MPI has no AVG op: SUM, then divide on completion
      return MPI_SUM;
    case DLHOST_REDUCE_MAX:
      return MPI_MAX;
    case DLHOST_REDUCE_MIN:
      return MPI_MIN;
    default:
      sdk::invalid(std::string(call) + ": unknown reduce op " + std::to_string(op));
  }
}

void MpiComm::check_pointer(const char* call, const char* name, const void* p, uint64_t count) {
  if (p == nullptr && count > 0)
    sdk::invalid(std::string(call) + ": " + name + " is NULL with count " + std::to_string(count));
}

void MpiComm::check_root(const char* call, int32_t root) const {
  if (root < 0 || root >= size_)
    sdk::invalid(std::string(call) + ": root " + std::to_string(root) + " is not a rank of " +
                 std::to_string(size_));
}

const void* MpiComm::gather_source(const void* send, const void* recv, uint64_t count,
                                   const Typed& t) const {
  const void* own_slot = static_cast<const char*>(recv) + rank_ * count * t.element_size;
  return send == own_slot && count > 0 ? MPI_IN_PLACE : send;
}

void divide_by(void* buffer, uint64_t count, int32_t dtype, int world) {
  switch (dtype) {
    case DLHOST_DTYPE_F32:
      return divide_typed<float>(buffer, count, world);
    case DLHOST_DTYPE_F64:
      return divide_typed<double>(buffer, count, world);
    case DLHOST_DTYPE_I32:
      return divide_typed<int32_t>(buffer, count, world);
    case DLHOST_DTYPE_I64:
      return divide_typed<int64_t>(buffer, count, world);
    default:
      return;  // checked when the collective was issued
  }
}

void MpiRequest::complete() {
  if (done_) return;
  done_ = true;
  if (avg_buffer_ != nullptr) divide_by(avg_buffer_, avg_count_, avg_dtype_, world_);
}

bool MpiRequest::test() {
  if (!done_) {
    int flag = 0;
    check_mpi(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) complete();
  }
  return done_;
}

void MpiRequest::wait() {
  if (done_) return;
  check_mpi(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait");
  complete();
}

MpiRequest::~MpiRequest() {
  if (done_ || request_ == MPI_REQUEST_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Wait(&request_, MPI_STATUS_IGNORE);
}

}  // namespace dlhost::comm_mpi
