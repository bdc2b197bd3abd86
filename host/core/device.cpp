// device.cpp — see device.h.
#include "core/device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/host_api.h"
#include "core/plugin_registry.h"

namespace dlhost {

BackendDevice::BackendDevice(const LoadedPlugin& backend)
    : name_(backend.name), api_(backend.table->backend), ext_(resolve_extensions(*backend.table)) {}

std::optional<dlhost_stream> BackendDevice::stream(dlhost_model* model) const {
  if (ext_.stream == nullptr) return std::nullopt;
  dlhost_stream s{};
  s.struct_size = DLHOST_STREAM_STRUCT_SIZE;
  check_status(ext_.stream->model_stream(model, &s), name_ + " model_stream");
  return s;
}

std::optional<dlhost_buffer> BackendDevice::input_buffer(dlhost_model* model,
                                                         int32_t tensor) const {
  if (ext_.memory == nullptr) return std::nullopt;
  dlhost_buffer b{};
  b.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  check_status(ext_.memory->input_buffer(model, tensor, &b),
               name_ + " input_buffer of tensor " + std::to_string(tensor));
  return b;
}

void BackendDevice::read_tensor(dlhost_model* model, int32_t tensor, void* dst,
                                size_t bytes) const {
  if (ext_.tensor_read == nullptr)
    throw Error(DLHOST_CODE_UNIMPLEMENTED,
                name_ + " cannot read tensors (no DLHOST_EXT_TENSOR_READ)");
  check_status(ext_.tensor_read->read_tensor(model, tensor, dst, bytes),
               name_ + " read_tensor " + std::to_string(tensor));
}

std::optional<dlhost_memory_stats> BackendDevice::memory_stats(dlhost_model* model) const {
  if (ext_.memory == nullptr) return std::nullopt;
  dlhost_memory_stats s{};
  s.struct_size = DLHOST_MEMORY_STATS_STRUCT_SIZE;
  check_status(ext_.memory->memory_stats(model, &s), name_ + " memory_stats");
  return s;
}

const dlhost_device_memory_ext& BackendDevice::need_memory(const char* what) const {
  if (ext_.memory == nullptr)
    throw Error(DLHOST_CODE_FAILED_PRECONDITION,
                name_ + ": " + what + " needs the device memory extension, which it lacks");
  return *ext_.memory;
}

void BackendDevice::copy_to_host(dlhost_context* context, dlhost_model* model,
                                 const dlhost_buffer& src, uint64_t offset, void* dst,
                                 uint64_t bytes) const {
  check_status(need_memory("copy_to_host").copy_to_host(context, model, &src, offset, dst, bytes),
               name_ + " copy_to_host");
}

void BackendDevice::copy_from_host(dlhost_context* context, dlhost_model* model, const void* src,
                                   const dlhost_buffer& dst, uint64_t offset,
                                   uint64_t bytes) const {
  check_status(
      need_memory("copy_from_host").copy_from_host(context, model, src, &dst, offset, bytes),
      name_ + " copy_from_host");
}

void BackendDevice::copy_device(dlhost_model* model, const dlhost_buffer& src, uint64_t src_offset,
                                const dlhost_buffer& dst, uint64_t dst_offset,
                                uint64_t bytes) const {
  check_status(
      need_memory("copy_device").copy_device(model, &src, src_offset, &dst, dst_offset, bytes),
      name_ + " copy_device");
}

DeviceEvent::DeviceEvent(const BackendDevice& backend, dlhost_model* model)
    : ext_(backend.events()), backend_(backend.name()) {
  if (ext_ == nullptr)
    throw Error(DLHOST_CODE_FAILED_PRECONDITION, backend_ + " has no events extension");
  check_status(ext_->event_create(model, &event_), backend_ + " event_create");
}

DeviceEvent::~DeviceEvent() {
  if (event_ != nullptr) ext_->event_destroy(event_);
}

DeviceEvent::DeviceEvent(DeviceEvent&& other) noexcept
    : ext_(other.ext_), backend_(std::move(other.backend_)), event_(other.event_) {
  other.event_ = nullptr;
}

void DeviceEvent::record() { check_status(ext_->event_record(event_), backend_ + " event_record"); }

void DeviceEvent::synchronize() {
  check_status(ext_->event_synchronize(event_), backend_ + " event_synchronize");
}

double DeviceEvent::ms_since(const DeviceEvent& start) const {
  double ms = 0;
  check_status(ext_->event_elapsed_ms(start.event_, event_, &ms), backend_ + " event_elapsed_ms");
  return ms;
}

DeviceBuffer::DeviceBuffer(const BackendDevice& backend, dlhost_context* context, uint64_t bytes,
                           int32_t dtype)
    : ext_(backend.memory()), context_(context) {
  if (ext_ == nullptr)
    throw Error(DLHOST_CODE_FAILED_PRECONDITION,
                backend.name() + " cannot allocate device buffers (no device memory extension)");
  buffer_.struct_size = DLHOST_BUFFER_STRUCT_SIZE;
  check_status(ext_->buffer_alloc(context, bytes, dtype, &buffer_),
               backend.name() + " buffer_alloc of " + std::to_string(bytes) + " bytes");
}

DeviceBuffer::~DeviceBuffer() { ext_->buffer_free(context_, &buffer_); }

StagingMemory::StagingMemory(const BackendDevice& backend, dlhost_context* context, size_t bytes)
    : ext_(backend.memory()), context_(context) {
  if (ext_ != nullptr) {
    check_status(ext_->host_alloc(context, bytes, &data_), backend.name() + " host_alloc");
    pinned_ = true;
  } else {
    data_ = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (data_ == nullptr) throw std::bad_alloc();
  }
  std::memset(data_, 0, bytes);
}

StagingMemory::~StagingMemory() {
  if (pinned_)
    ext_->host_free(context_, data_);
  else
    std::free(data_);
}

}  // namespace dlhost
