// device.h — the host's C++ layer over a backend's ABI 1.2 device features (dlhost_device.h):
// the backend's resolved extensions, RAII owners for events, device buffers and pinned host
// memory, and the copies between host and device. Used by the runner (event timing, per-step
// uploads, memory statistics, gradient arenas) and comm-bench (device buffers). A feature the
// backend lacks is absent here (NULL or nullopt), and the caller falls back to 1.1 behaviour.
//
// Ownership: every owner here goes before the model/context it was made from. Thread-safety: as
// the plugin calls they wrap (one thread per model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/plugin_extensions.h"
#include "dlhost/dlhost.h"

namespace dlhost {

struct LoadedPlugin;

// A backend's 1.2 view. Cheap to make (walks the plugin's extension chain).
class BackendDevice {
 public:
  explicit BackendDevice(const LoadedPlugin& backend);

  const std::string& name() const { return name_; }
  const dlhost_backend_api* api() const { return api_; }
  // Stream + events: the host can time on the device and synchronize once per step.
  bool has_events() const { return ext_.stream != nullptr && ext_.events != nullptr; }
  const dlhost_events_ext* events() const { return ext_.events; }
  const dlhost_device_memory_ext* memory() const { return ext_.memory; }  // NULL when absent
  // The model's stream; nullopt when the backend exports none.
  std::optional<dlhost_stream> stream(dlhost_model* model) const;
  // The device buffer of an input tensor; nullopt without the memory extension.
  std::optional<dlhost_buffer> input_buffer(dlhost_model* model, int32_t tensor) const;
  // The backend can copy a tensor's value after forward to the host (ABI 1.3).
  bool reads_tensors() const { return ext_.tensor_read != nullptr; }
  // The F32 value of `tensor` into `dst` (exactly its bytes); throws without the extension.
  void read_tensor(dlhost_model* model, int32_t tensor, void* dst, size_t bytes) const;
  // The memory statistics of `model`; nullopt without the memory extension.
  std::optional<dlhost_memory_stats> memory_stats(dlhost_model* model) const;

  // Ordered on the model's stream (else the context's queue) and waited for.
  void copy_to_host(dlhost_context* context, dlhost_model* model, const dlhost_buffer& src,
                    uint64_t offset, void* dst, uint64_t bytes) const;
  void copy_from_host(dlhost_context* context, dlhost_model* model, const void* src,
                      const dlhost_buffer& dst, uint64_t offset, uint64_t bytes) const;
  // Ordered on the model's stream; does not wait.
  void copy_device(dlhost_model* model, const dlhost_buffer& src, uint64_t src_offset,
                   const dlhost_buffer& dst, uint64_t dst_offset, uint64_t bytes) const;

 private:
  const dlhost_device_memory_ext& need_memory(const char* what) const;

  std::string name_;
  const dlhost_backend_api* api_;
  PluginExtensions ext_;
};

// An event on a model's stream.
class DeviceEvent {
 public:
  DeviceEvent(const BackendDevice& backend, dlhost_model* model);
  ~DeviceEvent();
  DeviceEvent(const DeviceEvent&) = delete;
  DeviceEvent& operator=(const DeviceEvent&) = delete;
  DeviceEvent(DeviceEvent&& other) noexcept;
  DeviceEvent& operator=(DeviceEvent&&) = delete;

  void record();       // after everything enqueued so far; does not block
  void synchronize();  // blocks until the work before the record has run
  // Device milliseconds from `start` to this event; both must have completed.
  double ms_since(const DeviceEvent& start) const;

 private:
  const dlhost_events_ext* ext_;
  std::string backend_;
  dlhost_event* event_ = nullptr;
};

// A device buffer the host owns (buffer_alloc / buffer_free).
class DeviceBuffer {
 public:
  DeviceBuffer(const BackendDevice& backend, dlhost_context* context, uint64_t bytes,
               int32_t dtype);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  const dlhost_buffer& get() const { return buffer_; }

 private:
  const dlhost_device_memory_ext* ext_;
  dlhost_context* context_;
  dlhost_buffer buffer_{};
};

// Host memory for per-step uploads: the backend's pinned memory when it offers it, else ordinary
// (page-aligned, touched once so that no page fault lands in a timed step).
class StagingMemory {
 public:
  StagingMemory(const BackendDevice& backend, dlhost_context* context, size_t bytes);
  ~StagingMemory();
  StagingMemory(const StagingMemory&) = delete;
  StagingMemory& operator=(const StagingMemory&) = delete;
  void* data() const { return data_; }
  bool pinned() const { return pinned_; }

 private:
  const dlhost_device_memory_ext* ext_;
  dlhost_context* context_;
  void* data_ = nullptr;
  bool pinned_ = false;
};

}  // namespace dlhost
