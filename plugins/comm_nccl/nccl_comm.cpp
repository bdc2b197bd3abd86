// nccl_comm.cpp — see nccl_comm.h.
#include "nccl_comm.h"

#include <cstdio>
#include <cstdlib>

#include "nccl_bootstrap.h"

namespace dlhost::comm_nccl {
namespace {

constexpr const char* kPeerHint = " (a peer rank is dead or stuck; the comm is aborted)";
constexpr double kDefaultTimeoutS = 300.0;

// --- init arguments ------------------------------------------------------------------------------

void check_world(const dlhost_comm_init_args& args) {
  if (args.world_size < 1 || args.rank < 0 || args.rank >= args.world_size)
    sdk::invalid("nccl: init: rank " + std::to_string(args.rank) + " is not in a world of " +
                 std::to_string(args.world_size));
}

// The model's stream the host hands over; NCCL cannot order collectives without one.
const dlhost_stream& stream_of(const dlhost_comm_init_args& args) {
  const dlhost_extension* found = dlhost_find_extension(args.extensions, DLHOST_EXT_COMM_STREAM);
  if (found == nullptr)
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
              "nccl: init: no CUDA stream was handed over (DLHOST_EXT_COMM_STREAM in the init "
              "arguments): NCCL orders every collective on the stream of the rank's model, so it "
              "runs only with a CUDA backend (backend: gpu_cudnn); use comm: mpi for host memory");
  if (found->struct_size < DLHOST_COMM_STREAM_EXT_STRUCT_SIZE)
    sdk::invalid("nccl: init: the stream extension is shorter than ABI 1.2's (struct_size " +
                 std::to_string(found->struct_size) + ")");
  const dlhost_stream& s = reinterpret_cast<const dlhost_comm_stream_ext*>(found)->stream;
  if (s.kind != DLHOST_STREAM_CUDA)
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
              "nccl: init: the model's stream is of kind " + std::to_string(s.kind) +
                  (s.kind == DLHOST_STREAM_HOST_QUEUE ? " (a host queue of a CPU stand-in backend)"
                                                      : "") +
                  ", not a CUDA stream: NCCL needs a CUDA backend");
  return s;
}

int pick_device(const dlhost_comm_init_args& args, const dlhost_stream& stream) {
  if (args.device >= 0 && stream.device >= 0 && args.device != stream.device)
    sdk::invalid("nccl: init: the rank's device is " + std::to_string(args.device) +
                 " but its model's stream is on device " + std::to_string(stream.device));
  const int device = args.device >= 0 ? args.device : stream.device;
  if (const std::string why = no_device_reason(); !why.empty())
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "nccl: init: no device: " + why);
  const int count = device_count();
  // One rank per GPU: NCCL refuses two ranks on one device. UNIMPLEMENTED, so that the host
  // records a case this node is too small for as SKIPPED with the reason, not as a failure.
  if (args.local_size > count)
    sdk::unimplemented("nccl: " + std::to_string(args.local_size) +
                       " ranks on this node need as many GPUs (one rank per GPU); it has " +
                       std::to_string(count));
  if (device < 0 || device >= count)
    sdk::invalid("nccl: init: device " + std::to_string(device) +
                 " does not exist (this machine has " + std::to_string(count) + " CUDA devices)");
  return device;
}

double timeout_option(const dlhost_comm_init_args& args) {
  const auto text = sdk::Options(args.options).get("timeout_s");
  if (!text) return kDefaultTimeoutS;
  char* end = nullptr;
  const double s = std::strtod(text->c_str(), &end);
  if (text->empty() || *end != '\0' || !(s > 0))
    sdk::invalid("nccl: option timeout_s must be a positive number of seconds, got '" + *text +
                 "'");
  return s;
}

std::string prefix_of(const dlhost_comm_init_args& args) {
  if (!DLHOST_HAS_FIELD(&args, dlhost_comm_init_args, store_prefix) || args.store_prefix == nullptr)
    return "";
  return args.store_prefix;
}

void check_buffers(const char* call, int32_t memory_space, uint64_t count,
                   std::initializer_list<const void*> buffers) {
  if (memory_space != DLHOST_MEMORY_DEVICE)
    sdk::invalid(
        std::string("nccl: ") + call + ": NCCL moves device memory only, got memory space " +
        std::to_string(memory_space) + (memory_space == DLHOST_MEMORY_HOST ? " (host)" : "") +
        "; use comm: mpi for host buffers");
  for (const void* b : buffers)
    if (b == nullptr && count > 0) sdk::invalid(std::string("nccl: ") + call + ": NULL buffer");
}

// --- requests ------------------------------------------------------------------------------------

// A collective NCCL has enqueued on the stream (complete), or one of a group still being built
// (complete at the group's end).
class OrderedRequest final : public sdk::Request {
 public:
  OrderedRequest(std::shared_ptr<CommState> state, uint64_t group)
      : state_(std::move(state)), group_(group) {}
  bool test() override {
    if (group_ != 0 && state_->open_group == group_) return false;
    return state_->settled("collective");
  }
  void wait() override {
    if (group_ != 0 && state_->open_group == group_)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
                "nccl: wait on a collective of a group that has not ended (call group_end first)");
    poll_until([&] { return state_->settled("collective"); }, "collective", state_->timeout,
               state_->aborted, [&] { return state_->reason(); }, kPeerHint);
  }

 private:
  std::shared_ptr<CommState> state_;
  uint64_t group_;
};

// A barrier: complete when the device has passed its all-reduce.
class BarrierRequest final : public sdk::Request {
 public:
  BarrierRequest(std::shared_ptr<CommState> state, cudaEvent_t done)
      : state_(std::move(state)), done_(done) {}
  ~BarrierRequest() override { cudaEventDestroy(done_); }
  BarrierRequest(const BarrierRequest&) = delete;
  BarrierRequest& operator=(const BarrierRequest&) = delete;

  bool test() override {
    const bool settled = state_->settled("barrier");  // also reports a peer's failure
    const cudaError_t q = cudaEventQuery(done_);
    if (q == cudaErrorNotReady) return false;
    check_cuda(q, "barrier: cudaEventQuery");
    return settled;
  }
  void wait() override {
    try {
      poll_until([&] { return test(); }, "barrier", state_->timeout, state_->aborted,
                 [&] { return state_->reason(); }, kPeerHint);
    } catch (const sdk::Error& e) {
      if (e.code() == DLHOST_CODE_DEADLINE_EXCEEDED) {
        std::lock_guard<std::mutex> lock(state_->mutex);
        state_->abort_locked(e.what());
      }
      throw;
    }
  }

 private:
  std::shared_ptr<CommState> state_;
  cudaEvent_t done_;
};

}  // namespace

// --- shared state --------------------------------------------------------------------------------

std::string CommState::reason() {
  std::lock_guard<std::mutex> lock(mutex);
  return abort_reason;
}

void CommState::abort_locked(const std::string& why) {
  if (aborted.exchange(true)) return;
  abort_reason = why;
  if (comm != nullptr) ncclCommAbort(comm);  // ends the kernels still waiting on a peer
  comm = nullptr;
  sdk::log(DLHOST_LOG_WARN, kName, "communicator aborted: " + why);
}

bool CommState::settled(const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex);
  if (aborted) sdk::fail(DLHOST_CODE_ABORTED, "nccl: " + what + ": " + abort_reason);
  if (comm == nullptr)
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "nccl: " + what + ": the comm was finalized");
  ncclResult_t state = ncclSuccess;
  check_nccl(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError", comm);
  if (state == ncclInProgress) return false;
  if (state == ncclSuccess) return true;
  std::string message = std::string("nccl: ") + what + ": " + ncclGetErrorString(state);
  if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0')
    message += std::string(" (") + last + ")";
  abort_locked(message);  // NCCL's rule: a comm with an asynchronous error must be aborted
  sdk::fail(code_of(state), message);
}

// --- the communicator ----------------------------------------------------------------------------

NcclComm::NcclComm(const dlhost_comm_init_args& args) {
  check_world(args);
  const dlhost_stream& stream = stream_of(args);
  state_->timeout = std::chrono::duration<double>(timeout_option(args));
  state_->device = pick_device(args, stream);
  rank_ = args.rank;
  world_ = args.world_size;
  stream_ = static_cast<cudaStream_t>(stream.handle);
  DeviceGuard on_device(state_->device);
  const auto timeout_ms = static_cast<int64_t>(state_->timeout.count() * 1000.0);
  const ncclUniqueId id = exchange_unique_id(unique_id_key(prefix_of(args)), rank_, timeout_ms);
  init_nccl(id);
  try {
    check_cuda(cudaMalloc(&scratch_, sizeof(int32_t)), "cudaMalloc (barrier scratch)");
    if (world_ > 1) watchdog_ = std::thread(&NcclComm::watchdog, this);
  } catch (...) {
    abort("init failed");
    if (scratch_ != nullptr) cudaFree(scratch_);
    throw;
  }
}

void NcclComm::init_nccl(const ncclUniqueId& id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns; we poll, so a missing peer cannot hang init
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, world_, id, rank_, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    fail_nccl(r, "ncclCommInitRankConfig", nullptr);
  }
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->comm = comm;
  }
  settle("init of rank " + std::to_string(rank_) + " of " + std::to_string(world_));
}

NcclComm::~NcclComm() {
  stop_watchdog();
  shut_down();
  for (const Pending& p : pending_) cudaEventDestroy(p.done);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  if (scratch_ != nullptr) cudaFree(scratch_);
}

void NcclComm::shut_down() {
  try {
    ncclResult_t r = ncclSuccess;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (state_->aborted || state_->comm == nullptr) return;
      r = ncclCommFinalize(state_->comm);  // flushes what the stream still holds, on every rank
      if (r != ncclSuccess && r != ncclInProgress) fail_nccl(r, "ncclCommFinalize", state_->comm);
    }
    settle("finalize");
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->comm != nullptr) ncclCommDestroy(state_->comm);
    state_->comm = nullptr;
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->abort_locked(std::string("finalize failed: ") + e.what());
  }
}

void NcclComm::settle(const std::string& what) {
  try {
    poll_until([&] { return state_->settled(what); }, what, state_->timeout, state_->aborted,
               [&] { return state_->reason(); }, kPeerHint);
  } catch (const sdk::Error& e) {
    // A comm stuck half-way through an enqueue is unusable: abort it so every rank moves on.
    if (e.code() == DLHOST_CODE_DEADLINE_EXCEEDED) abort(e.what());
    throw;
  }
}

template <class Launch>
std::unique_ptr<sdk::Request> NcclComm::issue(const std::string& what, Launch&& launch) {
  ++issued_;
  ncclResult_t r = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->aborted)
      sdk::fail(DLHOST_CODE_ABORTED, "nccl: " + what + ": " + state_->abort_reason);
    r = launch(state_->comm);
    if (r != ncclSuccess && r != ncclInProgress) fail_nccl(r, what, state_->comm);
  }
  if (group_depth_ > 0) {
    group_ops_.push_back(what);
    return std::make_unique<OrderedRequest>(state_, state_->open_group);
  }
  if (r == ncclInProgress) settle(what);
  if (world_ > 1) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->aborted) watch_locked(what + " #" + std::to_string(issued_));
  }
  return std::make_unique<OrderedRequest>(state_, 0);
}

std::unique_ptr<sdk::Request> NcclComm::all_reduce(const void* send, void* recv, uint64_t count,
                                                   int32_t dtype, int32_t op,
                                                   int32_t memory_space) {
  check_buffers("all_reduce", memory_space, count, {send, recv});
  const ncclDataType_t type = nccl_dtype(dtype, "all_reduce");
  const ncclRedOp_t red = nccl_op(op, "all_reduce");
  return issue("all_reduce", [&](ncclComm_t c) {
    return ncclAllReduce(send, recv, count, type, red, c, stream_);
  });
}

std::unique_ptr<sdk::Request> NcclComm::broadcast(void* buffer, uint64_t count, int32_t dtype,
                                                  int32_t root, int32_t memory_space) {
  check_buffers("broadcast", memory_space, count, {buffer});
  if (root < 0 || root >= world_)
    sdk::invalid("nccl: broadcast: root " + std::to_string(root) + " is not a rank of a world of " +
                 std::to_string(world_));
  const ncclDataType_t type = nccl_dtype(dtype, "broadcast");
  return issue("broadcast", [&](ncclComm_t c) {
    return ncclBroadcast(buffer, buffer, count, type, root, c, stream_);
  });
}

std::unique_ptr<sdk::Request> NcclComm::all_gather(const void* send, void* recv, uint64_t count,
                                                   int32_t dtype, int32_t memory_space) {
  check_buffers("all_gather", memory_space, count, {send, recv});
  const ncclDataType_t type = nccl_dtype(dtype, "all_gather");
  return issue("all_gather",
               [&](ncclComm_t c) { return ncclAllGather(send, recv, count, type, c, stream_); });
}

std::unique_ptr<sdk::Request> NcclComm::barrier() {
  if (group_depth_ > 0)
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
              "nccl: barrier inside a group: a barrier must wait for the device, which a group "
              "defers to its end");
  issue("barrier", [&](ncclComm_t c) {
    return ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, c, stream_);
  });
  cudaEvent_t done = nullptr;
  {
    DeviceGuard on_device(state_->device);
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "barrier: cudaEventCreate");
  }
  auto request = std::make_unique<BarrierRequest>(state_, done);
  check_cuda(cudaEventRecord(done, stream_), "barrier: cudaEventRecord");
  return request;
}

void NcclComm::group_start() {
  if (state_->aborted) sdk::fail(DLHOST_CODE_ABORTED, "nccl: group_start: " + state_->reason());
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  if (group_depth_++ == 0) {
    state_->open_group = ++groups_;
    group_ops_.clear();
  }
}

void NcclComm::group_end() {
  if (group_depth_ == 0)
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "nccl: group_end without group_start");
  ncclResult_t r = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    r = ncclGroupEnd();  // launches the group on the comm, so it holds the handle's lock
  }
  if (--group_depth_ > 0) {
    if (r != ncclSuccess) fail_nccl(r, "ncclGroupEnd (nested)", nullptr);
    return;
  }
  const std::string what = "group of " + std::to_string(group_ops_.size()) + " collectives";
  try {
    if (r != ncclSuccess && r != ncclInProgress) fail_nccl(r, "ncclGroupEnd", nullptr);
    if (r == ncclInProgress) settle(what);
  } catch (...) {
    state_->open_group = 0;
    throw;
  }
  state_->open_group = 0;
  if (world_ > 1 && !group_ops_.empty()) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->aborted) watch_locked(what + " (" + group_ops_.front() + ", ...)");
  }
}

void NcclComm::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->abort_locked(why);
}

// --- the watchdog --------------------------------------------------------------------------------

cudaEvent_t NcclComm::take_event_locked() {
  if (!spare_events_.empty()) {
    cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  DeviceGuard on_device(state_->device);
  cudaEvent_t e = nullptr;
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  return e;
}

void NcclComm::watch_locked(const std::string& what) {
  cudaEvent_t e = take_event_locked();
  const cudaError_t recorded = cudaEventRecord(e, stream_);
  if (recorded != cudaSuccess) {
    spare_events_.push_back(e);
    check_cuda(recorded, what + ": cudaEventRecord");
  }
  pending_.push_back({e, Clock::now(), what});
}

void NcclComm::check_watch_locked() {
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(state_->comm, &state) == ncclSuccess && state != ncclSuccess &&
      state != ncclInProgress) {
    const char* last = ncclGetLastError(state_->comm);
    state_->abort_locked("rank " + std::to_string(rank_) +
                         ": NCCL reported an asynchronous error: " + ncclGetErrorString(state) +
                         " (" + (last != nullptr ? last : "") + ")");
    return;
  }
  while (!pending_.empty()) {
    const Pending& front = pending_.front();
    const cudaError_t q = cudaEventQuery(front.done);
    if (q == cudaErrorNotReady) {
      if (Clock::now() - front.issued > state_->timeout) {
        char seconds[32];
        std::snprintf(seconds, sizeof(seconds), "%g", state_->timeout.count());
        state_->abort_locked("rank " + std::to_string(rank_) + ": " + front.what +
                             " did not finish on the device within " + seconds +
                             " s: a peer rank is dead or stuck");
      }
      return;
    }
    spare_events_.push_back(front.done);
    const std::string what = front.what;
    pending_.pop_front();
    if (q != cudaSuccess) {
      state_->abort_locked("rank " + std::to_string(rank_) + ": " + what + ": " +
                           cudaGetErrorString(q));
      return;
    }
  }
}

void NcclComm::watchdog() {
  try {
    DeviceGuard on_device(state_->device);
    for (;;) {
      {
        std::unique_lock<std::mutex> stop_lock(stop_mutex_);
        if (stop_cv_.wait_for(stop_lock, std::chrono::milliseconds(100), [&] { return stop_; }))
          return;
      }
      std::lock_guard<std::mutex> lock(state_->mutex);
      if (state_->aborted) return;
      check_watch_locked();
    }
  } catch (const std::exception& e) {
    sdk::log(DLHOST_LOG_ERROR, kName, std::string("watchdog stopped: ") + e.what());
  }
}

void NcclComm::stop_watchdog() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

}  // namespace dlhost::comm_nccl
