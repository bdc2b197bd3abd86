// nccl_comm.h — one `nccl` communicator: one rank per GPU, collectives on device memory ordered
// on the stream of the rank's model (DLHOST_EXT_COMM_STREAM), group calls, abort, and a
// watchdog so that a dead peer never leaves the other ranks hung.
//
// The comm is NCCL's nonblocking kind (config.blocking = 0): init, collectives and finalize
// return at once and are finished by polling ncclCommGetAsyncError against the `timeout_s`
// option, so no NCCL call can block a rank forever. A collective returns once NCCL has enqueued
// it on the stream; its request is then complete (ABI 1.2's rule for stream-ordered comms), and
// test/wait only report an error NCCL has seen since. Inside a group (group_start/group_end)
// requests complete at the outermost group_end. A barrier is the one request that waits for the
// device: an all-reduce of one int on the stream, complete when the stream has passed it.
//
// The watchdog thread polls the comm for an asynchronous error (a peer's connection dropped)
// and watches an event recorded after every collective; on an error, or a collective the device
// has not finished after timeout_s, it aborts the comm (ncclCommAbort), which ends the kernels a
// dead peer would leave spinning. The host's own watchdog may abort from its thread too.
//
// Thread-safety: the ABI's (one host thread uses a comm at a time); abort() and the watchdog
// may run concurrently with it: every use of the NCCL handle holds `mutex_`, and a call never
// holds it while it waits.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlhost/comm_kit.hpp"
#include "nccl_support.h"

namespace dlhost::comm_nccl {

// What the comm, its requests and its watchdog share; requests hold it so that one freed after
// finalize (or after abort) is still safe.
struct CommState {
  std::mutex mutex;
  ncclComm_t comm = nullptr;  // NULL once aborted
  std::atomic<bool> aborted{false};
  std::string abort_reason;  // guarded by mutex
  int device = 0;
  std::chrono::duration<double> timeout{300.0};
  uint64_t open_group = 0;  // serial of the group being built; 0 when none (comm thread only)

  std::string reason();
  // Aborts the NCCL comm once; `reason` says why to every later call. Caller holds `mutex`.
  void abort_locked(const std::string& why);
  // Throws ABORTED when aborted, or NCCL's asynchronous error; false while NCCL is still
  // enqueueing (ncclInProgress), true when it has finished.
  bool settled(const std::string& what);
};

class NcclComm final : public sdk::Comm {
 public:
  // Collective over every rank; see nccl_comm.cpp for the order of checks.
  explicit NcclComm(const dlhost_comm_init_args& args);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  std::unique_ptr<sdk::Request> all_reduce(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t op,
                                           int32_t memory_space) override;
  std::unique_ptr<sdk::Request> broadcast(void* buffer, uint64_t count, int32_t dtype, int32_t root,
                                          int32_t memory_space) override;
  std::unique_ptr<sdk::Request> all_gather(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t memory_space) override;
  std::unique_ptr<sdk::Request> barrier() override;

  void group_start();
  void group_end();
  // From any thread: ends every pending collective with ABORTED.
  void abort(const std::string& why);

 private:
  struct Pending {  // a collective the watchdog waits to see finish on the device
    cudaEvent_t done;
    Clock::time_point issued;
    std::string what;
  };

  void init_nccl(const ncclUniqueId& id);
  template <class Launch>
  std::unique_ptr<sdk::Request> issue(const std::string& what, Launch&& launch);
  void settle(const std::string& what);
  void watch_locked(const std::string& what);  // records an event the watchdog follows
  void watchdog();
  void check_watch_locked();
  void stop_watchdog();
  void shut_down();
  cudaEvent_t take_event_locked();

  std::shared_ptr<CommState> state_ = std::make_shared<CommState>();
  int32_t rank_ = 0, world_ = 1;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;  // one int on the device: the barrier's all-reduce
  uint64_t issued_ = 0;      // collectives issued, for messages
  uint64_t groups_ = 0;      // group serials handed out
  int group_depth_ = 0;
  std::vector<std::string> group_ops_;  // what the open group holds, watched at its end
  std::deque<Pending> pending_;         // guarded by state_->mutex
  std::vector<cudaEvent_t> spare_events_;
  std::thread watchdog_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
};

}  // namespace dlhost::comm_nccl
