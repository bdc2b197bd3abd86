// plugin_mpi.cpp — the `mpi` comm plugin: dlhost's collectives on MPI's nonblocking collectives
// (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather, MPI_Ibarrier), each behind a request the host
// tests or waits on, so gradient all-reduces can overlap the backward pass.
//
// Loading the library is cheap and launcher-free: the entry only fills tables (the comm kit);
// MPI starts in the first init (mpi_runtime.cpp). Host memory only unless MPI is CUDA-aware.
// Thread-safety: as the ABI says, one host thread at a time per comm (MPI_THREAD_SERIALIZED).
#include <memory>

#include "mpi_runtime.h"

namespace dlhost::comm_mpi {
namespace {

constexpr const char* kName = "mpi";

class NonblockingComm final : public MpiComm {
 public:
  explicit NonblockingComm(const dlhost_comm_init_args& args) : MpiComm(args, kName) {}

  std::unique_ptr<sdk::Request> all_reduce(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t op,
                                           int32_t memory_space) override {
    MPI_Op mpi_op;
    Typed t = check_all_reduce(send, recv, count, dtype, op, memory_space, &mpi_op);
    auto r = op == DLHOST_REDUCE_AVG ? std::make_unique<MpiRequest>(recv, count, dtype, size_)
                                     : std::make_unique<MpiRequest>();
    check_mpi(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, t.count, t.type, mpi_op,
                             comm_, r->handle()),
              "MPI_Iallreduce");
    return r;
  }

  std::unique_ptr<sdk::Request> broadcast(void* buffer, uint64_t count, int32_t dtype, int32_t root,
                                          int32_t memory_space) override {
    Typed t = check_buffer("broadcast", count, dtype, memory_space);
    check_root("broadcast", root);
    check_pointer("broadcast", "buffer", buffer, count);
    auto r = std::make_unique<MpiRequest>();
    check_mpi(MPI_Ibcast(buffer, t.count, t.type, root, comm_, r->handle()), "MPI_Ibcast");
    return r;
  }

  std::unique_ptr<sdk::Request> all_gather(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t memory_space) override {
    Typed t = check_buffer("all_gather", count, dtype, memory_space);
    check_pointer("all_gather", "send", send, count);
    check_pointer("all_gather", "recv", recv, count);
    auto r = std::make_unique<MpiRequest>();
    check_mpi(MPI_Iallgather(gather_source(send, recv, count, t), t.count, t.type, recv, t.count,
                             t.type, comm_, r->handle()),
              "MPI_Iallgather");
    return r;
  }

  std::unique_ptr<sdk::Request> barrier() override {
    auto r = std::make_unique<MpiRequest>();
    check_mpi(MPI_Ibarrier(comm_, r->handle()), "MPI_Ibarrier");
    return r;
  }
};

class NonblockingPlugin final : public MpiPlugin {
 public:
  // Linking libmpi is what made this library load, so MPI is there; whether a launcher started
  // this process is init's business (without one, MPI runs as a world of 1).
  int32_t query() const override { return 10; }
  std::unique_ptr<sdk::Comm> init(const dlhost_comm_init_args& args) override {
    return std::make_unique<NonblockingComm>(args);
  }
};

}  // namespace
}  // namespace dlhost::comm_mpi

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::comm_plugin<dlhost::comm_mpi::NonblockingPlugin>(
      host, {dlhost::comm_mpi::kName, "0.1.0",
             "Collectives on MPI's nonblocking collectives (host memory)"});
}
