// data_parallel.cpp — see data_parallel.h.
#include "run/data_parallel.h"

#include <cstring>
#include <utility>

#include "core/handles.h"
#include "core/host_api.h"
#include "suite/skip.h"

namespace dlhost {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Where a bucket moves, from where the gradients live, what the comm accepts and what the suite
// asked for. The comm's caps are read after its init: a CUDA-aware MPI says so only then.
GradientPath choose_path(const dlhost_buffer& grad, const CommSession& comm,
                         const BackendDevice& backend, GradientMemory asked) {
  if (grad.memory_space == DLHOST_MEMORY_HOST) {
    if (comm.caps().host_memory) return GradientPath::kHost;
    throw Error(DLHOST_CODE_UNIMPLEMENTED, "comm '" + comm.name() +
                                               "' accepts device memory only, and backend '" +
                                               backend.name() + "' keeps gradients in host memory");
  }
  if (backend.memory() == nullptr)
    throw Error(DLHOST_CODE_UNIMPLEMENTED,
                "backend '" + backend.name() +
                    "' keeps gradients in device memory but has no device memory extension "
                    "(the host cannot copy them)");
  const std::string library = comm.library().empty() ? "" : " (" + comm.library() + ")";
  // dlhost skips such a case before its ranks start (suite/skip.h); a comm whose answer changed
  // at init (a CUDA-aware MPI build with CUDA off at run time) is refused here, in the same words.
  if (asked == GradientMemory::kDevice && !comm.caps().device_memory)
    throw Error(DLHOST_CODE_UNIMPLEMENTED, device_memory_refusal(comm.name(), comm.library()));
  if (asked == GradientMemory::kHost && !comm.caps().host_memory)
    throw Error(DLHOST_CODE_UNIMPLEMENTED, "comm_memory: host, but comm '" + comm.name() + "'" +
                                               library + " takes device memory only");
  if (comm.caps().device_memory && asked != GradientMemory::kHost) return GradientPath::kDevice;
  if (comm.caps().host_memory) return GradientPath::kStaged;
  throw Error(DLHOST_CODE_UNIMPLEMENTED, "comm '" + comm.name() + "' accepts no memory space");
}

}  // namespace

GradientMemory gradient_memory_from(const std::string& suite_value) {
  if (suite_value == "device") return GradientMemory::kDevice;
  if (suite_value == "host") return GradientMemory::kHost;
  return GradientMemory::kAuto;
}

dlhost_buffer param_buffer(const dlhost_backend_api* api, dlhost_model* model, int32_t param,
                           bool grad) {
  dlhost_buffer value{}, gradient{};
  value.struct_size = gradient.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  check_status(api->param_buffers(model, param, &value, &gradient),
               "param_buffers of parameter " + std::to_string(param));
  return grad ? gradient : value;
}

const char* gradient_path_name(GradientPath path) {
  switch (path) {
    case GradientPath::kHost:
      return "host";
    case GradientPath::kDevice:
      return "device";
    case GradientPath::kStaged:
      return "staged";
  }
  return "?";
}

DataParallel::DataParallel(const DataParallelTarget& t, ControlPlane& control, double bucket_mb,
                           bool overlap)
    : session_(*t.comm),
      comm_api_(t.comm->api()),
      comm_(t.comm->get()),
      backend_(*t.backend),
      context_(t.context),
      model_(t.model),
      control_(control),
      overlap_(overlap),
      comm_on_stream_(t.comm_on_stream) {
  const uint64_t cap = static_cast<uint64_t>(bucket_mb * 1024 * 1024);
  bucket_of_.assign(static_cast<size_t>(t.num_params), -1);
  // Buckets in reverse parameter order: backward produces the last layer's gradients first.
  for (int32_t p = t.num_params - 1; p >= 0; --p) {
    dlhost_buffer grad = param_buffer(backend_.api(), model_, p, true);
    if (p == t.num_params - 1) path_ = choose_path(grad, session_, backend_, t.memory);
    add_gradient(p, grad, cap);
  }
  allocate();
  ready_.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  ready_.user = this;
  ready_.fn = &DataParallel::on_ready;
}

void DataParallel::add_gradient(int32_t p, const dlhost_buffer& grad, uint64_t cap) {
  const bool on_device = path_ != GradientPath::kHost;
  if ((grad.memory_space == DLHOST_MEMORY_DEVICE) != on_device)
    throw Error(DLHOST_CODE_UNIMPLEMENTED, "parameter " + std::to_string(p) +
                                               "'s gradient is in another memory space than "
                                               "the others (mixed host and device gradients)");
  if (sdk::dtype_size(grad.dtype) == 0 || grad.bytes % sdk::dtype_size(grad.dtype) != 0)
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, "parameter " + std::to_string(p) +
                                                  "'s gradient: " + std::to_string(grad.bytes) +
                                                  " bytes of dtype " + std::to_string(grad.dtype));
  if (!session_.supports(grad.dtype))
    throw Error(DLHOST_CODE_UNIMPLEMENTED, "comm '" + session_.name() + "' does not reduce dtype " +
                                               std::to_string(grad.dtype) + " (parameter " +
                                               std::to_string(p) + "'s gradient)");
  if (buckets_.empty() || buckets_.back().dtype != grad.dtype ||
      (buckets_.back().bytes + grad.bytes > cap && !buckets_.back().params.empty())) {
    buckets_.emplace_back();
    buckets_.back().dtype = grad.dtype;
  }
  Bucket& b = buckets_.back();
  b.grads.push_back(grad);
  b.params.push_back(p);
  b.bytes += grad.bytes;
  bucket_of_[static_cast<size_t>(p)] = static_cast<int32_t>(buckets_.size() - 1);
  bytes_ += grad.bytes;
}

void DataParallel::allocate() {
  for (auto& b : buckets_) {
    if (path_ == GradientPath::kDevice)
      b.arena = std::make_unique<DeviceBuffer>(backend_, context_, b.bytes, b.dtype);
    else
      b.host.assign(b.bytes, 0);  // touched now, not in the first timed step
  }
  if (path_ == GradientPath::kDevice && backend_.has_events()) {
    first_event_.emplace(backend_, model_);
    last_event_.emplace(backend_, model_);
  }
}

DataParallel::~DataParallel() {
  for (auto& b : buckets_) comm_api_->request_free(b.request);
}

void DataParallel::broadcast_value(const dlhost_buffer& value, int32_t p) {
  const uint64_t count = value.bytes / sdk::dtype_size(value.dtype);
  const std::string what = "broadcast of parameter " + std::to_string(p);
  std::vector<unsigned char> staged;
  void* data = value.data;
  int32_t space = value.memory_space;
  if (path_ == GradientPath::kStaged) {
    staged.resize(value.bytes);
    backend_.copy_to_host(context_, model_, value, 0, staged.data(), value.bytes);
    data = staged.data();
    space = DLHOST_MEMORY_HOST;
  }
  dlhost_request* r = nullptr;
  check_status(comm_api_->broadcast(comm_, data, count, value.dtype, 0, space, &r), what);
  session_.complete(r, what);
  if (path_ == GradientPath::kStaged)
    backend_.copy_from_host(context_, model_, staged.data(), value, 0, value.bytes);
}

void DataParallel::broadcast_parameters() {
  for (int32_t p = 0; p < static_cast<int32_t>(bucket_of_.size()); ++p)
    broadcast_value(param_buffer(backend_.api(), model_, p, false), p);
  // A stream-ordered broadcast has only been enqueued: done before anyone reads a weight.
  if (path_ == GradientPath::kDevice)
    check_status(backend_.api()->synchronize(model_), "synchronize after the broadcast");
}

void DataParallel::pack(Bucket& b) {
  uint64_t offset = 0;
  for (const auto& g : b.grads) {
    if (path_ == GradientPath::kHost)
      std::memcpy(b.host.data() + offset, g.data, g.bytes);
    else if (path_ == GradientPath::kStaged)
      backend_.copy_to_host(context_, model_, g, 0, b.host.data() + offset, g.bytes);
    else
      backend_.copy_device(model_, g, 0, b.arena->get(), offset, g.bytes);
    offset += g.bytes;
  }
}

void DataParallel::unpack(Bucket& b) {
  uint64_t offset = 0;
  for (const auto& g : b.grads) {
    if (path_ == GradientPath::kHost)
      std::memcpy(g.data, b.host.data() + offset, g.bytes);
    else if (path_ == GradientPath::kStaged)
      backend_.copy_from_host(context_, model_, b.host.data() + offset, g, 0, g.bytes);
    else
      backend_.copy_device(model_, b.arena->get(), offset, g, 0, g.bytes);
    offset += g.bytes;
  }
}

void DataParallel::start(Bucket& b) {
  if (!any_started_) {
    first_start_ = Clock::now();
    if (first_event_) first_event_->record();
    any_started_ = true;
  }
  // Packed in bucket order; the averages come back into the same places in finish().
  pack(b);
  void* data = path_ == GradientPath::kDevice ? b.arena->get().data : b.host.data();
  const int32_t space = path_ == GradientPath::kDevice ? DLHOST_MEMORY_DEVICE : DLHOST_MEMORY_HOST;
  // A device comm that does not order on the stream reads the arena at once: the packing
  // copies must have run.
  if (path_ == GradientPath::kDevice && !comm_on_stream_)
    check_status(backend_.api()->synchronize(model_), "synchronize before the all-reduce");
  check_status(comm_api_->all_reduce(comm_, data, data, b.count(), b.dtype, DLHOST_REDUCE_AVG,
                                     space, &b.request),
               "gradient all-reduce");
  b.started = true;
}

void DataParallel::progress() {
  // MPI moves a nonblocking collective forward only inside MPI calls: testing is what lets the
  // all-reduce advance while backward computes.
  for (auto& b : buckets_) {
    if (!b.started || b.done) continue;
    int32_t done = 0;
    check_status(comm_api_->test(b.request, &done), "comm test");
    if (done) {
      comm_api_->request_free(b.request);
      b.request = nullptr;
      b.done = true;
    }
  }
}

void DataParallel::on_ready(void* self, int32_t param) {
  auto* dp = static_cast<DataParallel*>(self);
  if (param < 0 || static_cast<size_t>(param) >= dp->bucket_of_.size()) return;
  Bucket& b = dp->buckets_[static_cast<size_t>(dp->bucket_of_[static_cast<size_t>(param)])];
  ++b.ready;
  if (!dp->overlap_) return;
  // The callback may not throw into the backend (C ABI); errors surface in finish().
  try {
    if (b.ready == static_cast<int>(b.params.size())) dp->start(b);
    dp->progress();
  } catch (...) {
  }
}

void DataParallel::finish(DataParallelStats* stats) {
  auto backward_end = Clock::now();
  for (auto& b : buckets_)
    if (!b.started) start(b);
  for (auto& b : buckets_) {
    if (!b.done) {
      // Cleared first: complete() frees the request even when the wait fails and throws, and the
      // destructor frees what is left in b.request (a failed peer made this a double free).
      dlhost_request* r = std::exchange(b.request, nullptr);
      session_.complete(r, "comm wait");
    }
    unpack(b);
  }
  if (last_event_) last_event_->record();
  auto end = Clock::now();
  if (stats != nullptr) {
    stats->exposed_ms = ms_between(backward_end, end);
    stats->allreduce_ms = ms_between(first_start_, end);
    stats->bytes = bytes_;
    stats->buckets = static_cast<int>(buckets_.size());
  }
  for (auto& b : buckets_) {
    b.ready = 0;
    b.started = b.done = false;
  }
  any_started_ = false;
}

void DataParallel::settle(DataParallelStats* stats) {
  if (stats != nullptr && first_event_ && last_event_)
    stats->allreduce_ms = last_event_->ms_since(*first_event_);
}

void DataParallel::all_reduce_max(std::vector<double>& values) {
  control_.all_reduce(values.data(), values.size(), DLHOST_DTYPE_F64, DLHOST_REDUCE_MAX);
}

void DataParallel::all_reduce_sum(std::vector<double>& values) {
  control_.all_reduce(values.data(), values.size(), DLHOST_DTYPE_F64, DLHOST_REDUCE_SUM);
}

void DataParallel::barrier() { control_.barrier(); }

}  // namespace dlhost
