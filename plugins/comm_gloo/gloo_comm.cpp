// gloo_comm.cpp — the `gloo` communicator: argument checks, dtype and reduce-op mapping onto
// Gloo's typed collectives, the worker thread and its requests (see gloo_comm.h).
#include "gloo_comm.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "host_store.h"

namespace dlhost::comm_gloo {
namespace {

// Calls f(T{}) with the C++ type of a dtype the plugin carries (checked when issued).
template <class F>
void with_type(int32_t dtype, F&& f) {
  switch (dtype) {
    case DLHOST_DTYPE_F32:
      return f(float{});
    case DLHOST_DTYPE_F64:
      return f(double{});
    case DLHOST_DTYPE_I32:
      return f(int32_t{});
    default:
      return f(int64_t{});
  }
}

void check_dtype(const std::string& call, int32_t dtype) {
  switch (dtype) {
    case DLHOST_DTYPE_F32:
    case DLHOST_DTYPE_F64:
    case DLHOST_DTYPE_I32:
    case DLHOST_DTYPE_I64:
      return;
    case DLHOST_DTYPE_F16:
    case DLHOST_DTYPE_BF16:
      sdk::unimplemented("gloo: " + call + ": 16-bit floats are not carried (F32, F64, I32, I64)");
    default:
      sdk::invalid("gloo: " + call + ": unknown dtype " + std::to_string(dtype));
  }
}

void check_buffer(const std::string& call, const char* name, const void* p, uint64_t count,
                  int32_t dtype, int32_t memory_space) {
  if (memory_space != DLHOST_MEMORY_HOST)
    sdk::invalid("gloo: " + call + ": host memory only, got memory space " +
                 std::to_string(memory_space));
  check_dtype(call, dtype);
  if (p == nullptr && count > 0)
    sdk::invalid("gloo: " + call + ": " + name + " is NULL with count " + std::to_string(count));
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Gloo's element-wise function for a reduce op (AVG sums; the division follows).
template <class T>
ReduceFn reduce_function(int32_t op) {
  if (op == DLHOST_REDUCE_MAX) return static_cast<ReduceFn>(&gloo::max<T>);
  if (op == DLHOST_REDUCE_MIN) return static_cast<ReduceFn>(&gloo::min<T>);
  return static_cast<ReduceFn>(&gloo::sum<T>);
}

template <class T>
const gloo::ReductionFunction<T>* reduction(int32_t op) {
  if (op == DLHOST_REDUCE_MAX) return gloo::ReductionFunction<T>::max;
  if (op == DLHOST_REDUCE_MIN) return gloo::ReductionFunction<T>::min;
  return gloo::ReductionFunction<T>::sum;
}

// AVG = SUM / world: one correctly rounded division of the exact sum (integers truncate), as
// comm-bench's checker computes it.
template <class T>
void divide(T* x, size_t count, int32_t world) {
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<T>(x[i] / static_cast<T>(world));
}

// What one all-reduce needs on the worker.
struct AllReduceJob {
  std::shared_ptr<gloo::Context> context;
  Algorithm algorithm;
  const void* send;
  void* recv;
  size_t count;
  int32_t op;
  uint32_t tag;
  std::chrono::milliseconds timeout;

  template <class T>
  void run() const {
    T* out = static_cast<T*>(recv);
    if (algorithm == Algorithm::halving_doubling) {
      // Gloo's halving-doubling works in place on the buffers it is built with.
      if (send != recv) std::memmove(recv, send, count * sizeof(T));
      gloo::AllreduceHalvingDoubling<T>(context, {out}, static_cast<int>(count), reduction<T>(op))
          .run();
    } else {
      gloo::AllreduceOptions o(context);
      o.setAlgorithm(algorithm == Algorithm::bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                   : gloo::AllreduceOptions::Algorithm::RING);
      if (send != recv) o.setInput(const_cast<T*>(static_cast<const T*>(send)), count);
      o.setOutput(out, count);
      o.setReduceFunction(reduce_function<T>(op));
      o.setTag(tag);
      o.setTimeout(timeout);
      gloo::allreduce(o);
    }
    if (op == DLHOST_REDUCE_AVG) divide(out, count, context->size);
  }
};

// Gloo writes to its sockets with writev: a peer that died makes that raise SIGPIPE, which would
// kill this rank instead of failing the collective. While alive, this blocks SIGPIPE on the
// calling thread (and on the threads it starts, which inherit the mask: Gloo's TCP loop), so
// writev returns EPIPE instead; a SIGPIPE raised meanwhile is dropped before the mask returns.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{0, 0};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_, old_;
};

// The numeric local address this rank sends from toward the rendezvous store (DLHOST_STORE's
// HOST, "SECRET@HOST:PORT"), read from a connected UDP socket (connect() on UDP sends nothing):
// an address the other ranks reach too. "" when no store is named or there is no route.
std::string route_toward_store() {
  const char* store = std::getenv("DLHOST_STORE");
  if (store == nullptr) return "";
  std::string host = store;
  if (const size_t at = host.find('@'); at != std::string::npos) host.erase(0, at + 1);
  if (const size_t colon = host.rfind(':'); colon != std::string::npos) host.erase(colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (host.empty() || getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return "";
  std::string address;
  const int fd = socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_storage local{};
  socklen_t size = sizeof local;
  char text[INET6_ADDRSTRLEN] = {};
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0) {
    const void* in =
        local.ss_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (inet_ntop(local.ss_family, in, text, sizeof text) != nullptr) address = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return address;
}

std::string listen_address(const dlhost_comm_init_args& args, const Settings& s) {
  if (!s.hostname.empty() || !s.iface.empty()) return s.hostname;
  // Every rank on this node: loopback needs no name resolution and no routable interface.
  if (args.local_size == args.world_size) return "127.0.0.1";
  // Else the address this rank reaches the store from, which its peers reach as well: on test
  // hosts its own namespace's (every test host shares this machine's name, which resolved to
  // loopback there, so each rank dialled itself). Without a store, this node's name ("").
  return route_toward_store();
}

}  // namespace

// --- worker and requests ------------------------------------------------------------------------

Worker::Worker()
    : thread_([this] {
        const SigpipeBlocked for_this_thread;
        loop();
      }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  posted_.notify_one();
  thread_.join();
}

std::future<void> Worker::post(std::function<void()> job) {
  std::packaged_task<void()> task(std::move(job));
  std::future<void> done = task.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(task));
  }
  posted_.notify_one();
  return done;
}

void Worker::loop() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      posted_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and nothing left to run
      task = std::move(jobs_.front());
      jobs_.pop_front();
    }
    task();  // an exception is kept in the task's future
  }
}

GlooRequest::~GlooRequest() {
  if (!finished_ && done_.valid()) done_.wait();
}

bool GlooRequest::test() {
  if (!finished_ && done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) wait();
  if (error_) std::rethrow_exception(error_);
  return finished_;
}

void GlooRequest::wait() {
  if (!finished_) {
    finished_ = true;
    try {
      done_.get();
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  if (error_) std::rethrow_exception(error_);
}

// --- the communicator ---------------------------------------------------------------------------

GlooComm::GlooComm(const dlhost_comm_init_args& args, const Settings& settings)
    : settings_(settings), rank_(args.rank), size_(args.world_size) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    sdk::invalid("gloo: init: rank " + std::to_string(rank_) + " is not a rank of a world of " +
                 std::to_string(size_));
  HostStore store(args.store_prefix, rank_, settings.timeout);
  gloo::transport::tcp::attr attr;
  attr.hostname = listen_address(args, settings);
  attr.iface = settings.iface;
  const SigpipeBlocked during_init;  // and in Gloo's TCP loop thread, started here
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context->setTimeout(settings.timeout);
    context->connectFullMesh(store, device);
    context_ = std::move(context);
  } catch (const gloo::Exception& e) {
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "gloo: init: rank " + std::to_string(rank_) + " of " +
                                           std::to_string(size_) + " could not connect to its " +
                                           "peers (store keys '" + store.scope() +
                                           "*'): " + e.what());
  }
}

void GlooComm::run(const char* call, const std::function<void()>& job) {
  if (!failure_.empty())
    sdk::fail(
        DLHOST_CODE_FAILED_PRECONDITION,
        std::string("gloo: ") + call + ": not run, an earlier collective failed: " + failure_);
  try {
    job();
  } catch (const gloo::Exception& e) {
    // Gloo throws IoException for a peer that closed its connection and for a timeout alike;
    // only the text tells ("Timed out waiting ..." from unbound buffers, "Read timeout" from the
    // halving-doubling algorithm's buffers).
    const std::string what = e.what();
    const bool timed_out =
        what.find("Timed out") != std::string::npos || what.find("timeout") != std::string::npos;
    failure_ = std::string(call) + " on rank " + std::to_string(rank_) +
               (timed_out ? " timed out after " + std::to_string(settings_.timeout.count()) +
                                " ms (a peer rank stopped?): "
                          : " failed (a peer rank died?): ") +
               what;
    sdk::fail(timed_out ? DLHOST_CODE_DEADLINE_EXCEEDED : DLHOST_CODE_UNAVAILABLE,
              "gloo: " + failure_);
  }
}

std::unique_ptr<sdk::Request> GlooComm::post(const char* call, std::function<void()> job) {
  return std::make_unique<GlooRequest>(
      worker_.post([this, call, job = std::move(job)] { run(call, job); }));
}

std::unique_ptr<sdk::Request> GlooComm::all_reduce(const void* send, void* recv, uint64_t count,
                                                   int32_t dtype, int32_t op,
                                                   int32_t memory_space) {
  check_buffer("all_reduce", "send", send, count, dtype, memory_space);
  check_buffer("all_reduce", "recv", recv, count, dtype, memory_space);
  if (op < DLHOST_REDUCE_SUM || op > DLHOST_REDUCE_MIN)
    sdk::invalid("gloo: all_reduce: unknown reduce op " + std::to_string(op));
  if (settings_.algorithm == Algorithm::halving_doubling && count > uint64_t(INT_MAX))
    sdk::invalid("gloo: all_reduce: count " + std::to_string(count) +
                 " exceeds halving-doubling's int count limit");
  if (count == 0) return sdk::completed();
  const AllReduceJob j{context_, settings_.algorithm, send, recv, count, op,
                       tag_++,   settings_.timeout};
  return post("all_reduce",
              [j, dtype] { with_type(dtype, [&](auto t) { j.run<decltype(t)>(); }); });
}

std::unique_ptr<sdk::Request> GlooComm::broadcast(void* buffer, uint64_t count, int32_t dtype,
                                                  int32_t root, int32_t memory_space) {
  check_buffer("broadcast", "buffer", buffer, count, dtype, memory_space);
  if (root < 0 || root >= size_)
    sdk::invalid("gloo: broadcast: root " + std::to_string(root) + " is not a rank of " +
                 std::to_string(size_));
  if (count == 0) return sdk::completed();
  return post("broadcast", [c = context_, buffer, count, dtype, root, tag = tag_++,
                            timeout = settings_.timeout] {
    with_type(dtype, [&](auto t) {
      using T = decltype(t);
      gloo::BroadcastOptions o(c);
      o.setOutput(static_cast<T*>(buffer), count);  // the root sends from it too
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(timeout);
      gloo::broadcast(o);
    });
  });
}

std::unique_ptr<sdk::Request> GlooComm::all_gather(const void* send, void* recv, uint64_t count,
                                                   int32_t dtype, int32_t memory_space) {
  check_buffer("all_gather", "send", send, count, dtype, memory_space);
  check_buffer("all_gather", "recv", recv, count, dtype, memory_space);
  if (count == 0) return sdk::completed();
  return post("all_gather",
              [c = context_, send, recv, count, dtype, tag = tag_++, timeout = settings_.timeout] {
                with_type(dtype, [&](auto t) {
                  using T = decltype(t);
                  T* out = static_cast<T*>(recv);
                  gloo::AllgatherOptions o(c);
                  // Without an input Gloo gathers in place, from this rank's own block of the
                  // output.
                  if (send != out + size_t(c->rank) * count)
                    o.setInput(const_cast<T*>(static_cast<const T*>(send)), count);
                  o.setOutput(out, count * size_t(c->size));
                  o.setTag(tag);
                  o.setTimeout(timeout);
                  gloo::allgather(o);
                });
              });
}

std::unique_ptr<sdk::Request> GlooComm::barrier() {
  return post("barrier", [c = context_, tag = tag_++, timeout = settings_.timeout] {
    gloo::BarrierOptions o(c);
    o.setTag(tag);
    o.setTimeout(timeout);
    gloo::barrier(o);
  });
}

}  // namespace dlhost::comm_gloo
