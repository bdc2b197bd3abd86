// data_parallel.cpp — see data_parallel.h.
#include "run/data_parallel.h"

#include <cstring>

#include "core/handles.h"
#include "core/host_api.h"

namespace dlhost {

namespace {
using Clock = std::chrono::steady_clock;
}

DataParallel::DataParallel(const CommSession& comm, const dlhost_backend_api* backend,
                           dlhost_model* model, int32_t num_params, double bucket_mb, bool overlap)
    : session_(comm),
      comm_api_(comm.api()),
      comm_(comm.get()),
      backend_(backend),
      model_(model),
      overlap_(overlap) {
  // Buckets in reverse parameter order: backward produces the last layer's gradients first.
  const uint64_t cap = static_cast<uint64_t>(bucket_mb * 1024 * 1024);
  bucket_of_.assign(static_cast<size_t>(num_params), -1);
  for (int32_t p = num_params - 1; p >= 0; --p) {
    dlhost_buffer value{}, grad{};
    value.struct_size = grad.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
    check_status(backend_->param_buffers(model_, p, &value, &grad), "param_buffers");
    if (grad.memory_space != DLHOST_MEMORY_HOST)
      throw Error(DLHOST_CODE_UNIMPLEMENTED,
                  "data-parallel training of device-memory gradients needs a comm with device "
                  "memory support");
    if (buckets_.empty() ||
        (buckets_.back().packed.size() * 4 + grad.bytes > cap && !buckets_.back().params.empty()))
      buckets_.emplace_back();
    Bucket& b = buckets_.back();
    b.grads.push_back(grad);
    b.params.push_back(p);
    b.packed.resize(b.packed.size() + grad.bytes / 4);
    bucket_of_[static_cast<size_t>(p)] = static_cast<int32_t>(buckets_.size() - 1);
    bytes_ += grad.bytes;
  }
  // Touch every bucket once now, not in the first timed step (fresh pages are slow here).
  for (auto& b : buckets_) std::memset(b.packed.data(), 0, b.packed.size() * 4);
  ready_.struct_size = DLHOST_GRAD_READY_STRUCT_SIZE;
  ready_.user = this;
  ready_.fn = &DataParallel::on_ready;
}

DataParallel::~DataParallel() {
  for (auto& b : buckets_) comm_api_->request_free(b.request);
}

void DataParallel::wait(dlhost_request* r) { session_.complete(r, "comm wait"); }

void DataParallel::broadcast_parameters() {
  int32_t n = static_cast<int32_t>(bucket_of_.size());
  for (int32_t p = 0; p < n; ++p) {
    dlhost_buffer value{}, grad{};
    value.struct_size = grad.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
    check_status(backend_->param_buffers(model_, p, &value, &grad), "param_buffers");
    dlhost_request* r = nullptr;
    check_status(comm_api_->broadcast(comm_, value.data, value.bytes / 4, DLHOST_DTYPE_F32, 0,
                                      value.memory_space, &r),
                 "broadcast of parameter " + std::to_string(p));
    wait(r);
  }
}

void DataParallel::start(Bucket& b) {
  // Pack in bucket order; the averaged values come back into the same places in finish().
  size_t offset = 0;
  for (const auto& g : b.grads) {
    std::memcpy(b.packed.data() + offset, g.data, g.bytes);
    offset += g.bytes / 4;
  }
  if (!any_started_) {
    first_start_ = Clock::now();
    any_started_ = true;
  }
  check_status(
      comm_api_->all_reduce(comm_, b.packed.data(), b.packed.data(), b.packed.size(),
                            DLHOST_DTYPE_F32, DLHOST_REDUCE_AVG, DLHOST_MEMORY_HOST, &b.request),
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
      wait(b.request);
      b.request = nullptr;
    }
    size_t offset = 0;
    for (const auto& g : b.grads) {
      std::memcpy(g.data, b.packed.data() + offset, g.bytes);
      offset += g.bytes / 4;
    }
  }
  auto end = Clock::now();
  if (stats != nullptr) {
    stats->exposed_ms = std::chrono::duration<double, std::milli>(end - backward_end).count();
    stats->allreduce_ms = std::chrono::duration<double, std::milli>(end - first_start_).count();
    stats->bytes = bytes_;
    stats->buckets = static_cast<int>(buckets_.size());
  }
  for (auto& b : buckets_) {
    b.ready = 0;
    b.started = b.done = false;
  }
  any_started_ = false;
}

void DataParallel::all_reduce_max(std::vector<double>& values) {
  session_.all_reduce(values.data(), values.size(), DLHOST_DTYPE_F64, DLHOST_REDUCE_MAX);
}

void DataParallel::all_reduce_sum(std::vector<double>& values) {
  session_.all_reduce(values.data(), values.size(), DLHOST_DTYPE_F64, DLHOST_REDUCE_SUM);
}

void DataParallel::barrier() { session_.barrier(); }

}  // namespace dlhost
