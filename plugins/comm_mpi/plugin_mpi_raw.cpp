// plugin_mpi_raw.cpp — the `mpi_raw` comm plugin: the baseline of `dlhost comm-bench --comm mpi`.
// Each collective is the plain blocking MPI call (MPI_Allreduce, MPI_Bcast, MPI_Allgather,
// MPI_Barrier) and returns a request that is already complete (sdk::completed()), so the same
// sweep through `mpi` and `mpi_raw` shows what the nonblocking collectives and their requests
// cost, as a ratio.
//
// It is a separate library rather than an extension of `mpi` because the host never links MPI
// and extension types can only be allocated in the ABI header. A usable plugin of its own right
// (blocking collectives are correct, just not overlappable), but at a priority below `mpi` so a
// suite that lets the host choose never picks it. Thread-safety: as for `mpi`.
#include <memory>

#include "mpi_runtime.h"

namespace dlhost::comm_mpi {
namespace {

constexpr const char* kName = "mpi_raw";

class BlockingComm final : public MpiComm {
 public:
  explicit BlockingComm(const dlhost_comm_init_args& args) : MpiComm(args, kName) {}

  std::unique_ptr<sdk::Request> all_reduce(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t op,
                                           int32_t memory_space) override {
    MPI_Op mpi_op;
    Typed t = check_all_reduce(send, recv, count, dtype, op, memory_space, &mpi_op);
    check_mpi(
        MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, t.count, t.type, mpi_op, comm_),
        "MPI_Allreduce");
    if (op == DLHOST_REDUCE_AVG) divide_by(recv, count, dtype, size_);  // no MPI AVG op
    return sdk::completed();
  }

  std::unique_ptr<sdk::Request> broadcast(void* buffer, uint64_t count, int32_t dtype, int32_t root,
                                          int32_t memory_space) override {
    Typed t = check_buffer("broadcast", count, dtype, memory_space);
    check_root("broadcast", root);
    check_pointer("broadcast", "buffer", buffer, count);
    check_mpi(MPI_Bcast(buffer, t.count, t.type, root, comm_), "MPI_Bcast");
    return sdk::completed();
  }

  std::unique_ptr<sdk::Request> all_gather(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t memory_space) override {
    Typed t = check_buffer("all_gather", count, dtype, memory_space);
    check_pointer("all_gather", "send", send, count);
    check_pointer("all_gather", "recv", recv, count);
    check_mpi(MPI_Allgather(gather_source(send, recv, count, t), t.count, t.type, recv, t.count,
                            t.type, comm_),
              "MPI_Allgather");
    return sdk::completed();
  }

  std::unique_ptr<sdk::Request> barrier() override {
    check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
    return sdk::completed();
  }
};

class BlockingPlugin final : public MpiPlugin {
 public:
  int32_t query() const override { return 0; }  // below `mpi`: a baseline, not a default
  std::unique_ptr<sdk::Comm> init(const dlhost_comm_init_args& args) override {
    return std::make_unique<BlockingComm>(args);
  }
};

}  // namespace
}  // namespace dlhost::comm_mpi

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::comm_plugin<dlhost::comm_mpi::BlockingPlugin>(
      host, {dlhost::comm_mpi::kName, "0.1.0",
             "Blocking MPI collectives, requests complete on return: comm-bench's baseline for "
             "`mpi`"});
}
