// gloo_comm.h — the `gloo` comm plugin's communicator: dlhost's collectives on Gloo (Debian's
// libgloo-dev, the collective library PyTorch uses on CPUs) over its TCP transport, bootstrapped
// through the host's rendezvous store (host_store.h).
//
// Gloo's collectives block the calling thread. To give the host asynchronous requests (gradient
// buckets all-reduced while backward goes on), each comm owns one worker thread that runs its
// collectives in the order they were issued (the order every rank issues them in, as Gloo needs);
// a request is the future of one collective. The first collective that fails (a peer died, a
// timeout) fails its request, and every later one fails at once naming that first error, so no
// rank waits on a peer that is gone.
//
// Thread-safety: as the ABI says, one host thread at a time issues on a comm and tests or waits
// its requests; the worker is the only thread that touches the Gloo context after init.
#pragma once

#include <gloo/context.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dlhost/comm_kit.hpp"

namespace dlhost::comm_gloo {

namespace sdk = dlhost::sdk;

// Gloo's all-reduce algorithms the plugin option `algorithm` selects.
enum class Algorithm { ring, halving_doubling, bcube };

// What a comm is made with: the plugin options, parsed (plugin_gloo.cpp).
struct Settings {
  Algorithm algorithm = Algorithm::ring;
  std::chrono::milliseconds timeout{600000};  // every wait: rendezvous, each collective
  std::string hostname;                       // where this rank listens ("" : see GlooComm)
  std::string iface;                          // or the address of this network interface
};

// Runs jobs one at a time, in the order posted, on a thread of its own.
class Worker {
 public:
  Worker();
  // Runs what is still queued (their requests borrow buffers the host may only reuse after
  // them), then joins.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  std::future<void> post(std::function<void()> job);

 private:
  void loop();
  std::mutex mutex_;
  std::condition_variable posted_;
  std::deque<std::packaged_task<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

// One collective on the worker. Its error is thrown by every test() and wait() once complete (a
// caller that saw it in test() and waits anyway must not read success). Destroying it before
// completion waits for it: the buffers it borrows must outlive it.
class GlooRequest final : public sdk::Request {
 public:
  explicit GlooRequest(std::future<void> done) : done_(std::move(done)) {}
  ~GlooRequest() override;
  bool test() override;
  void wait() override;

 private:
  std::future<void> done_;
  bool finished_ = false;
  std::exception_ptr error_;
};

class GlooComm final : public sdk::Comm {
 public:
  // Collective over every rank: creates the TCP device and connects a full mesh of pairs through
  // the host's store. Listens on settings.hostname or settings.iface when given, else on the
  // loopback address when every rank is on this node, else on this node's hostname.
  GlooComm(const dlhost_comm_init_args& args, const Settings& settings);

  std::unique_ptr<sdk::Request> all_reduce(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t op,
                                           int32_t memory_space) override;
  std::unique_ptr<sdk::Request> broadcast(void* buffer, uint64_t count, int32_t dtype, int32_t root,
                                          int32_t memory_space) override;
  std::unique_ptr<sdk::Request> all_gather(const void* send, void* recv, uint64_t count,
                                           int32_t dtype, int32_t memory_space) override;
  std::unique_ptr<sdk::Request> barrier() override;

 private:
  // Queues `job` on the worker behind the earlier collectives; `call` names it in errors.
  std::unique_ptr<sdk::Request> post(const char* call, std::function<void()> job);
  // Runs on the worker: `job`, with Gloo's errors turned into sdk::Errors and remembered.
  void run(const char* call, const std::function<void()>& job);

  std::shared_ptr<gloo::Context> context_;
  Settings settings_;
  int32_t rank_, size_;
  uint32_t tag_ = 0;     // one per collective, the same sequence on every rank
  std::string failure_;  // the first failed collective (worker thread only)
  Worker worker_;        // last: stopped before the context goes
};

}  // namespace dlhost::comm_gloo
