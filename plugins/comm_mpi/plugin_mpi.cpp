// plugin_mpi.cpp — the `mpi` comm plugin: dlhost's collectives on MPI's nonblocking collectives
// (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather, MPI_Ibarrier), each behind a request the host
// tests or waits on, so gradient all-reduces can overlap the backward pass.
//
// Loading the library is cheap and launcher-free: the entry only fills tables; MPI starts in the
// first init (mpi_runtime.cpp). Host memory only unless the MPI library is CUDA-aware.
// Thread-safety: as the ABI says, one host thread at a time per comm (MPI_THREAD_SERIALIZED).
#include <memory>

#include "mpi_runtime.h"

namespace dlhost::comm_mpi {
namespace {

namespace sdk = dlhost::sdk;
constexpr const char* kName = "mpi";

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

dlhost_status* all_reduce(dlhost_comm* comm, const void* send, void* recv, uint64_t count,
                          int32_t dtype, int32_t op, int32_t memory_space,
                          dlhost_request** request) {
  return sdk::guard([&] {
    Typed t = check_buffer_args("all_reduce", comm, count, dtype, memory_space, request);
    MPI_Op mpi_op = check_reduce_op("all_reduce", op);
    check_pointer("all_reduce", "send", send, count);
    check_pointer("all_reduce", "recv", recv, count);
    auto r = std::make_unique<dlhost_request>();
    if (op == DLHOST_REDUCE_AVG) {
      r->avg_buffer = recv;
      r->avg_count = count;
      r->avg_dtype = dtype;
      r->world = comm->size;
    }
    check_mpi(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, t.count, t.type, mpi_op,
                             comm->comm, &r->request),
              "MPI_Iallreduce");
    *request = r.release();
  });
}

dlhost_status* broadcast(dlhost_comm* comm, void* buffer, uint64_t count, int32_t dtype,
                         int32_t root, int32_t memory_space, dlhost_request** request) {
  return sdk::guard([&] {
    Typed t = check_buffer_args("broadcast", comm, count, dtype, memory_space, request);
    check_root("broadcast", comm, root);
    check_pointer("broadcast", "buffer", buffer, count);
    auto r = std::make_unique<dlhost_request>();
    check_mpi(MPI_Ibcast(buffer, t.count, t.type, root, comm->comm, &r->request), "MPI_Ibcast");
    *request = r.release();
  });
}

dlhost_status* all_gather(dlhost_comm* comm, const void* send, void* recv, uint64_t count,
                          int32_t dtype, int32_t memory_space, dlhost_request** request) {
  return sdk::guard([&] {
    Typed t = check_buffer_args("all_gather", comm, count, dtype, memory_space, request);
    check_pointer("all_gather", "send", send, count);
    check_pointer("all_gather", "recv", recv, count);
    // In place when the caller's block already sits at its slot of `recv`.
    const void* own_slot = static_cast<const char*>(recv) + comm->rank * count * t.element_size;
    auto r = std::make_unique<dlhost_request>();
    check_mpi(MPI_Iallgather(send == own_slot && count > 0 ? MPI_IN_PLACE : send, t.count, t.type,
                             recv, t.count, t.type, comm->comm, &r->request),
              "MPI_Iallgather");
    *request = r.release();
  });
}

dlhost_status* barrier(dlhost_comm* comm, dlhost_request** request) {
  return sdk::guard([&] {
    if (comm == nullptr || request == nullptr) sdk::invalid("barrier: comm or request is NULL");
    auto r = std::make_unique<dlhost_request>();
    check_mpi(MPI_Ibarrier(comm->comm, &r->request), "MPI_Ibarrier");
    *request = r.release();
  });
}

dlhost_status* query(int32_t* priority) {
  // Linking libmpi is what made this library load, so MPI is there; whether a launcher started
  // this process is init's business (without one, MPI runs as a world of 1).
  if (priority != nullptr) *priority = 10;
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

const dlhost_plugin kPlugin = {DLHOST_PLUGIN_STRUCT_SIZE,
                               DLHOST_ABI_MAJOR,
                               DLHOST_ABI_MINOR,
                               DLHOST_PLUGIN_COMM,
                               kName,
                               "0.1.0",
                               "Collectives on MPI's nonblocking collectives (host memory)",
                               query,
                               nullptr,
                               &kComm,
                               nullptr,
                               nullptr};

}  // namespace
}  // namespace dlhost::comm_mpi

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!dlhost::sdk::attach_host(host, "mpi")) return nullptr;
  return &dlhost::comm_mpi::kPlugin;
}
