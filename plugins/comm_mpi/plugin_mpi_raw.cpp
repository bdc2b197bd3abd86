// plugin_mpi_raw.cpp — the `mpi_raw` comm plugin: the baseline of `dlhost comm-bench --comm mpi`.
// Each collective is the plain blocking MPI call (MPI_Allreduce, MPI_Bcast, MPI_Allgather,
// MPI_Barrier) and returns a request that is already complete, so the same sweep through `mpi`
// and `mpi_raw` shows what the nonblocking collectives and their requests cost, as a ratio.
//
// It is a separate library rather than an extension of `mpi` because the host never links MPI
// and extension types can only be allocated in the ABI header. A usable plugin of its own right
// (blocking collectives are correct, just not overlappable), but at a priority below `mpi` so a
// suite that lets the host choose never picks it. Thread-safety: as for `mpi`.
#include <memory>

#include "mpi_runtime.h"

namespace dlhost::comm_mpi {
namespace {

namespace sdk = dlhost::sdk;
constexpr const char* kName = "mpi_raw";

dlhost_status* capabilities(dlhost_comm_caps* out) {
  return sdk::guard([&] { fill_capabilities(out); });
}

dlhost_status* init(const dlhost_comm_init_args* args, dlhost_comm** out) {
  return sdk::guard([&] {
    if (out == nullptr) sdk::invalid("init: out is NULL");
    *out = create_comm(args, kName);
  });
}

void finalize(dlhost_comm* comm) { destroy_comm(comm); }

// The request a blocking call hands back: complete, nothing to test.
dlhost_request* done_request() {
  auto r = std::make_unique<dlhost_request>();
  r->done = true;
  return r.release();
}

dlhost_status* all_reduce(dlhost_comm* comm, const void* send, void* recv, uint64_t count,
                          int32_t dtype, int32_t op, int32_t memory_space,
                          dlhost_request** request) {
  return sdk::guard([&] {
    Typed t = check_buffer_args("all_reduce", comm, count, dtype, memory_space, request);
    MPI_Op mpi_op = check_reduce_op("all_reduce", op);
    check_pointer("all_reduce", "send", send, count);
    check_pointer("all_reduce", "recv", recv, count);
    check_mpi(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, t.count, t.type, mpi_op,
                            comm->comm),
              "MPI_Allreduce");
    if (op == DLHOST_REDUCE_AVG) divide_by(recv, count, dtype, comm->size);  // no MPI AVG op
    *request = done_request();
  });
}

dlhost_status* broadcast(dlhost_comm* comm, void* buffer, uint64_t count, int32_t dtype,
                         int32_t root, int32_t memory_space, dlhost_request** request) {
  return sdk::guard([&] {
    Typed t = check_buffer_args("broadcast", comm, count, dtype, memory_space, request);
    check_root("broadcast", comm, root);
    check_pointer("broadcast", "buffer", buffer, count);
    check_mpi(MPI_Bcast(buffer, t.count, t.type, root, comm->comm), "MPI_Bcast");
    *request = done_request();
  });
}

dlhost_status* all_gather(dlhost_comm* comm, const void* send, void* recv, uint64_t count,
                          int32_t dtype, int32_t memory_space, dlhost_request** request) {
  return sdk::guard([&] {
    Typed t = check_buffer_args("all_gather", comm, count, dtype, memory_space, request);
    check_pointer("all_gather", "send", send, count);
    check_pointer("all_gather", "recv", recv, count);
    const void* own_slot = static_cast<const char*>(recv) + comm->rank * count * t.element_size;
    check_mpi(MPI_Allgather(send == own_slot && count > 0 ? MPI_IN_PLACE : send, t.count, t.type,
                            recv, t.count, t.type, comm->comm),
              "MPI_Allgather");
    *request = done_request();
  });
}

dlhost_status* barrier(dlhost_comm* comm, dlhost_request** request) {
  return sdk::guard([&] {
    if (comm == nullptr || request == nullptr) sdk::invalid("barrier: comm or request is NULL");
    check_mpi(MPI_Barrier(comm->comm), "MPI_Barrier");
    *request = done_request();
  });
}

dlhost_status* query(int32_t* priority) {
  if (priority != nullptr) *priority = 0;  // below `mpi`: a baseline, not a default
  return nullptr;
}

const dlhost_comm_api kComm = {DLHOST_COMM_API_STRUCT_SIZE,
                               capabilities,
                               init,
                               finalize,
                               all_reduce,
                               broadcast,
                               all_gather,
                               barrier,
                               test,
                               wait,
                               request_free};

const dlhost_plugin kPlugin = {
    DLHOST_PLUGIN_STRUCT_SIZE,
    DLHOST_ABI_MAJOR,
    DLHOST_ABI_MINOR,
    DLHOST_PLUGIN_COMM,
    kName,
    "0.1.0",
    "Blocking MPI collectives, requests complete on return: comm-bench's baseline for `mpi`",
    query,
    nullptr,
    &kComm,
    nullptr,
    nullptr};

}  // namespace
}  // namespace dlhost::comm_mpi

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!dlhost::sdk::attach_host(host, "mpi_raw")) return nullptr;
  return &dlhost::comm_mpi::kPlugin;
}
