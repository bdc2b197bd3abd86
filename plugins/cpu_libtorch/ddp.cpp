// ddp.cpp — `comm: torch_ddp`: PyTorch's own data parallelism, DistributedDataParallel's C++
// core, as cpu_libtorch2's tool runtime (ABI 1.5, DLHOST_EXT_TOOL_RUNTIME). What Python's DDP
// sets up, done from C++:
// - rank 0 serves a c10d::TCPStore on port 0 and publishes "host:port" through dlhost's
//   rendezvous store (the host serves that one and knows nothing of c10d); the other ranks read
//   it and connect;
// - each rank a ProcessGroupGloo (a gloo device on the rank's host address) behind a
//   c10d::ProcessGroup (setBackend: 2.x API), rank 0's parameters broadcast to all (DDP's
//   _sync_module_states);
// - DDP's c10d::Reducer over the parameters, buckets from compute_bucket_assignment_by_size with
//   DDP's sizes (first bucket 1 MiB, then the case's bucket_mb as DDP's bucket_cap_mb, 25 by
//   default; reversed as DDP does); autograd hooks
//   all-reduce each bucket during backward and write the average into the gradients before
//   backward returns, so `update` sees them averaged (synchronous).
// Communication time: the Reducer's Timer (kBackwardCommStart..End) is private and, in 2.x,
// recorded only on sampled iterations (the first ten, then every 100th: should_collect_runtime
// _stats), so this runtime measures the same span itself: from the first bucket's all-reduce
// start to the last bucket's completion, per step, through a C++ comm hook that does what DDP's
// default hook does (divide by the world size, all-reduce) and stamps the times.
// The Reducer's constructor is internal API: its signature is 2.15's (CMake pins the wheel's
// version for this file). Debian's libtorch 1.13 builds the query only, which says why not.
// Thread-safety: one host thread per model; the comm hook's completion runs on gloo's threads.
#include <torch/version.h>

#include <string>

#include "dlhost/common.hpp"
#include "dlhost/tool_runtime_kit.hpp"
#include "tool_runtime.h"

#ifdef DLHOST_TORCH_DDP
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>
#endif

namespace dlhost::cpu_libtorch {
namespace {

namespace sdk = dlhost::sdk;

constexpr const char* kRuntime = "torch_ddp";

#ifdef DLHOST_TORCH_DDP

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Per step, the span from the first bucket's all-reduce start to the last one's end.
class CommSpans {
 public:
  void begin_step() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_ >= 0 && last_ >= first_) spans_ms_.push_back(double(last_ - first_) / 1e6);
    first_ = last_ = -1;
  }
  void started(int64_t t) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_ < 0) first_ = t;
  }
  void ended(int64_t t) {
    std::lock_guard<std::mutex> lock(mutex_);
    last_ = std::max(last_, t);
  }
  std::vector<double> all() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<double> out = spans_ms_;
    if (first_ >= 0 && last_ >= first_) out.push_back(double(last_ - first_) / 1e6);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<double> spans_ms_;
  int64_t first_ = -1, last_ = -1;
};

// DDP's default all-reduce hook (divide by the world size, then all-reduce the bucket), with the
// start and the completion stamped: the completion through `then`, whose future the Reducer
// waits on, so the stamp is in before backward returns.
class TimedAllReduce final : public c10d::CommHookInterface {
 public:
  TimedAllReduce(c10::intrusive_ptr<c10d::ProcessGroup> group, CommSpans* spans)
      : group_(std::move(group)), spans_(spans) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    spans_->started(now_ns());
    std::vector<at::Tensor> tensors{bucket.getBufferRef()};
    tensors[0].div_(group_->getSize());
    auto done = group_->allreduce(tensors)->getFuture();
    CommSpans* spans = spans_;
    return done->then(
        [spans](c10::ivalue::Future& f) {
          spans->ended(now_ns());
          return f.value();
        },
        done->elementType());
  }
  at::Tensor parseHookResult(const c10::IValue& result) override {
    return c10d::detail::parseCppCommHookResult(result);
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  CommSpans* spans_;
};

// A short text for a store value's error.
std::string store_error(dlhost_status* status) {
  const std::string message = sdk::host()->status_message(status);
  sdk::host()->status_destroy(status);
  return message;
}

class Ddp final : public ModelRuntime {
 public:
  Ddp(std::vector<at::Tensor>& params, const dlhost_tool_runtime_args& a) {
    // DDP's bucket_cap_mb: the case's bucket_mb (checked before any peer is waited for).
    const double bucket_mb = sdk::option_double(a.options, "bucket_mb", 25.0);
    if (!(bucket_mb > 0) || bucket_mb > 1e6)
      sdk::invalid("torch_ddp: bucket_mb " + std::to_string(bucket_mb) +
                   " is not a bucket size in MiB (0 < bucket_mb <= 1e6)");
    const size_t bucket_bytes = static_cast<size_t>(bucket_mb * 1024 * 1024);
    const std::chrono::milliseconds timeout(a.timeout_ms);
    const std::string key = std::string(a.store_prefix) + "torch_ddp/tcpstore";
    c10d::TCPStoreOptions o;
    o.timeout = timeout;
    o.waitWorkers = false;  // rank 0 publishes its port only after the constructor returns
    o.numWorkers = static_cast<size_t>(a.world_size);
    std::string address = a.host;
    if (a.rank == 0) {
      o.port = 0;
      o.isServer = true;
      store_ = c10::make_intrusive<c10d::TCPStore>(address, o);
      const std::string where = address + ":" + std::to_string(store_->getPort());
      if (dlhost_status* s = sdk::host()->store_set(key.c_str(), where.data(), where.size()))
        sdk::fail(DLHOST_CODE_INTERNAL, "torch_ddp: publishing c10d's TCPStore: " + store_error(s));
    } else {
      char value[300];
      size_t size = 0;
      if (dlhost_status* s =
              sdk::host()->store_get(key.c_str(), a.timeout_ms, value, sizeof value, &size))
        sdk::fail(DLHOST_CODE_DEADLINE_EXCEEDED,
                  "torch_ddp: rank 0's c10d TCPStore address: " + store_error(s));
      const std::string where(value, size);
      const size_t colon = where.rfind(':');
      o.port = static_cast<uint16_t>(std::stoi(where.substr(colon + 1)));
      o.isServer = false;
      store_ = c10::make_intrusive<c10d::TCPStore>(where.substr(0, colon), o);
    }
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(a.host));
    auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, a.rank, a.world_size, options);
    group_ = c10::make_intrusive<c10d::ProcessGroup>(store_, a.rank, a.world_size);
    group_->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    group_->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);

    // DDP's _sync_module_states: every rank starts from rank 0's parameters.
    for (at::Tensor& p : params) {
      std::vector<at::Tensor> one{p.detach()};
      group_->broadcast(one)->wait();
    }

    // DDP's buckets: sizes [1 MiB, bucket_cap_mb] over the parameters, reversed (the order their
    // gradients come in backward). bucket_cap_mb is the case's bucket_mb (25 unset, PyTorch's
    // default); the first bucket stays 1 MiB, as DDP's _DEFAULT_FIRST_BUCKET_BYTES.
    constexpr size_t kFirstBucket = 1024 * 1024;
    auto [buckets, limits] =
        c10d::compute_bucket_assignment_by_size(params, {kFirstBucket, bucket_bytes}, {}, {});
    std::reverse(buckets.begin(), buckets.end());
    std::vector<int64_t> caps(limits.rbegin(), limits.rend());
    reducer_ = std::make_unique<c10d::Reducer>(
        params, std::move(buckets), group_, std::vector<bool>(params.size(), false),
        int64_t(bucket_bytes), /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false,
        std::unordered_map<size_t, std::string>{}, int64_t(kFirstBucket),
        /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false, std::move(caps));
    reducer_->register_comm_hook(std::make_unique<TimedAllReduce>(group_, &spans_));
  }
  ~Ddp() override {
    reducer_.reset();  // its hooks off the parameters' accumulators first
  }

  void before_backward(const at::Tensor& loss) override {
    spans_.begin_step();
    reducer_->prepare_for_backward({loss});
  }
  std::vector<double> comm_times() const { return spans_.all(); }

 private:
  c10::intrusive_ptr<c10d::TCPStore> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::unique_ptr<c10d::Reducer> reducer_;
  CommSpans spans_;
};

// Strings of the info struct: alive as long as the library (the same for every model).
const std::string& library_text() {
  static const std::string text = std::string("c10d Reducer over ProcessGroupGloo (libtorch ") +
                                  TORCH_VERSION + ", gloo transport tcp)";
  return text;
}
constexpr const char* kCommTime =
    "per step, from the first bucket's all-reduce start to the last bucket's end (what the "
    "Reducer's kBackwardCommStart..kBackwardCommEnd timer spans), stamped by a C++ comm hook "
    "doing DDP's default all-reduce; overlaps backward";

dlhost_status* query(const char* runtime) {
  return sdk::guard([&] {
    if (runtime == nullptr || std::string(runtime) != kRuntime)
      sdk::unimplemented(DLHOST_TORCH_PLUGIN_NAME ": no runtime '" +
                         std::string(runtime ? runtime : "") + "' (owns: torch_ddp)");
  });
}

RuntimeHost& host_of(dlhost_model* model) {
  RuntimeHost* h = model == nullptr ? nullptr : runtime_host(*reinterpret_cast<sdk::Model*>(model));
  if (h == nullptr) sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": not a model of this backend");
  return *h;
}

dlhost_status* attach(dlhost_model* model, const dlhost_tool_runtime_args* args,
                      dlhost_tool_runtime_info* info) {
  return sdk::guard([&] {
    if (args == nullptr || !DLHOST_HAS_FIELD(args, dlhost_tool_runtime_args, options))
      sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": runtime_attach: args missing or too short");
    sdk::check(query(args->runtime));
    if (args->role != DLHOST_RUNTIME_WORKER || args->world_size < 1 || args->rank < 0 ||
        args->rank >= args->world_size || args->store_prefix == nullptr || args->host == nullptr)
      sdk::invalid(DLHOST_TORCH_PLUGIN_NAME ": torch_ddp: bad rank, world, role or address");
    RuntimeHost& h = host_of(model);
    try {
      h.set_runtime(std::make_unique<Ddp>(h.parameters(), *args));
    } catch (const c10::Error& e) {
      sdk::fail(DLHOST_CODE_UNAVAILABLE, std::string("torch_ddp: ") + e.what_without_backtrace());
    }
    sdk::fill_runtime_info(info, "sync", library_text().c_str(), kCommTime);
  });
}

dlhost_status* comm_times(dlhost_model* model, double* ms, size_t capacity, size_t* count) {
  return sdk::guard([&] {
    auto* ddp = dynamic_cast<Ddp*>(host_of(model).runtime());
    if (ddp == nullptr)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, DLHOST_TORCH_PLUGIN_NAME ": no runtime attached");
    sdk::copy_comm_times(ddp->comm_times(), ms, capacity, count, DLHOST_TORCH_PLUGIN_NAME);
  });
}

#else  // Debian's libtorch 1.13, another wheel version, or no gloo headers

dlhost_status* query(const char* runtime) {
  return sdk::guard([&] {
    sdk::unimplemented(
        DLHOST_TORCH_PLUGIN_NAME ": runtime '" + std::string(runtime ? runtime : "") +
        "' is not built into libtorch " + TORCH_VERSION +
        ": it needs libtorch " DLHOST_TORCH_DDP_VERSION
        " with gloo headers (c10d's ProcessGroup::setBackend is 2.x API, and "
        "the Reducer's constructor, internal API, is called as " DLHOST_TORCH_DDP_VERSION
        " has it); cpu_libtorch2 on the PyPI wheel has it");
  });
}
dlhost_status* attach(dlhost_model*, const dlhost_tool_runtime_args* args,
                      dlhost_tool_runtime_info*) {
  return query(args != nullptr ? args->runtime : nullptr);
}
dlhost_status* comm_times(dlhost_model*, double*, size_t, size_t*) { return query(kRuntime); }

#endif

}  // namespace

void link_tool_runtime(sdk::ExtensionChain& chain) {
  static dlhost_tool_runtime_ext ext =
      sdk::tool_runtime_extension(kRuntime, query, attach, comm_times);
  chain.link(&ext);
}

}  // namespace dlhost::cpu_libtorch
