// bench_memory.cpp — see bench_memory.h.
#include "commbench/bench_memory.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/plugin_registry.h"

namespace dlhost {

namespace {

// y = fc(x), MSE against a target, batch 1: the smallest graph every backend compiles.
std::unique_ptr<Graph> stream_graph() {
  GraphBuilder b("comm_bench_stream", 1);
  int32_t x = b.input("x", DLHOST_DTYPE_F32, {1});
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {1});
  dlhost_fc_attrs fc{};
  fc.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
  fc.out_features = 1;
  fc.batch_dims = 1;
  b.mse_loss("loss", b.fc("fc", x, fc), target);
  return b.finish();
}

}  // namespace

DeviceRig::DeviceRig(const LoadedPlugin& backend, int32_t device)
    : backend_(backend), device_(device), graph_(stream_graph()) {
  if (backend_.memory() == nullptr)
    throw Error(DLHOST_CODE_FAILED_PRECONDITION,
                "backend '" + backend.name +
                    "' has no device memory extension: it cannot allocate device buffers");
  const dlhost_options none;
  context_ = create_context(backend, device, none);
  auto sgd = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  sgd.kind = DLHOST_OPTIMIZER_SGD;
  model_ = compile_model(backend, context_.get(), graph_->view(), sgd, none);
  if (auto stream = backend_.stream(model_.get())) {
    stream_ext_.struct_size = DLHOST_COMM_STREAM_EXT_STRUCT_SIZE;
    stream_ext_.type = DLHOST_EXT_COMM_STREAM;
    stream_ext_.stream = *stream;
  }
}

DeviceRig::~DeviceRig() = default;

CommDevice DeviceRig::comm_device() const {
  CommDevice d;
  d.device = device_;
  if (stream_ext_.struct_size != 0)
    d.extensions = reinterpret_cast<const dlhost_extension*>(&stream_ext_);
  return d;
}

void DeviceRig::synchronize() const {
  check_status(backend_.api()->synchronize(model_.get()), backend_.name() + " synchronize");
}

void BenchMemory::Free::operator()(void* p) const { std::free(p); }

BenchMemory::Host BenchMemory::host_buffer(size_t bytes) {
  size_t rounded = std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096);
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);  // every page faulted in now, not in a timed collective
  return Host(p);
}

BenchMemory::BenchMemory(size_t bytes, const DeviceRig* rig)
    : rig_(rig),
      host_send_(host_buffer(bytes)),
      host_recv_(host_buffer(bytes)),
      expected_(host_buffer(bytes)) {
  if (rig_ == nullptr) return;
  // The dtype of a buffer is only a label for the allocator: the comm is told each call's.
  send_ = std::make_unique<DeviceBuffer>(rig_->backend(), rig_->context(), bytes, DLHOST_DTYPE_F32);
  recv_ = std::make_unique<DeviceBuffer>(rig_->backend(), rig_->context(), bytes, DLHOST_DTYPE_F32);
}

BenchMemory::~BenchMemory() = default;

const void* BenchMemory::send() const { return rig_ ? send_->get().data : host_send_.get(); }

void* BenchMemory::recv() const { return rig_ ? recv_->get().data : host_recv_.get(); }

void BenchMemory::load_input(size_t bytes) {
  if (rig_)
    rig_->backend().copy_from_host(rig_->context(), rig_->model(), host_send_.get(), send_->get(),
                                   0, bytes);
}

void BenchMemory::input_to_recv(size_t bytes) {
  if (rig_)
    rig_->backend().copy_from_host(rig_->context(), rig_->model(), host_send_.get(), recv_->get(),
                                   0, bytes);
  else
    std::memcpy(host_recv_.get(), host_send_.get(), bytes);
}

void BenchMemory::poison(size_t bytes) {
  std::memset(host_recv_.get(), 0x7f, bytes);
  if (rig_)
    rig_->backend().copy_from_host(rig_->context(), rig_->model(), host_recv_.get(), recv_->get(),
                                   0, bytes);
}

const void* BenchMemory::results(size_t bytes) {
  if (rig_)
    rig_->backend().copy_to_host(rig_->context(), rig_->model(), recv_->get(), 0, host_recv_.get(),
                                 bytes);
  return host_recv_.get();
}

void BenchMemory::drain() const {
  if (rig_) rig_->synchronize();
}

}  // namespace dlhost
