// bench_memory.h — where comm-bench's buffers live. Host memory (every 1.1 comm), or the device
// memory of a backend (--backend; ABI 1.2) for a comm that works on device memory: the backend
// allocates the send and receive buffers (buffer_alloc), compiles a one-layer model whose stream
// the comm orders its collectives on (the ABI exports streams per model), and the host's copies
// of the inputs and of the results to check cross with copy_from_host / copy_to_host on that
// stream. The host never touches device memory.
//
// Not thread-safe: one thread drives the bench.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "core/device.h"
#include "core/graph.h"
#include "core/handles.h"

namespace dlhost {

struct LoadedPlugin;

// A backend's device opened for comm-bench: context, a tiny model for its stream, the stream
// extension to hand the comm.
class DeviceRig {
 public:
  // Throws Error naming the backend when it cannot allocate device buffers or compile.
  DeviceRig(const LoadedPlugin& backend, int32_t device);
  ~DeviceRig();
  DeviceRig(const DeviceRig&) = delete;
  DeviceRig& operator=(const DeviceRig&) = delete;

  const BackendDevice& backend() const { return backend_; }
  int32_t device() const { return device_; }
  dlhost_context* context() const { return context_.get(); }
  dlhost_model* model() const { return model_.get(); }
  // For the comm's init: the device and, when the backend exports one, the model's stream.
  CommDevice comm_device() const;
  void synchronize() const;  // waits for the model's stream

 private:
  BackendDevice backend_;
  int32_t device_;
  std::unique_ptr<Graph> graph_;
  ContextHandle context_{nullptr, ContextDeleter{nullptr}};
  ModelHandle model_{nullptr, ModelDeleter{nullptr}};
  dlhost_comm_stream_ext stream_ext_{};
};

// The send and receive buffers of the sweep (the largest size, allocated once) and the host's
// views of them: `host_send` holds the input, `expected` what a correct collective leaves.
class BenchMemory {
 public:
  // `rig` NULL: host memory. Page-aligned and zero-filled either way, before any timing.
  BenchMemory(size_t bytes, const DeviceRig* rig);
  ~BenchMemory();
  BenchMemory(const BenchMemory&) = delete;
  BenchMemory& operator=(const BenchMemory&) = delete;

  // What the collectives are given.
  const void* send() const;
  void* recv() const;
  int32_t space() const { return rig_ ? DLHOST_MEMORY_DEVICE : DLHOST_MEMORY_HOST; }

  void* host_send() const { return host_send_.get(); }
  void* expected() const { return expected_.get(); }
  // Puts the first `bytes` of host_send into the send buffer (a no-op in host memory).
  void load_input(size_t bytes);
  // The root of a broadcast starts with its input in the receive buffer.
  void input_to_recv(size_t bytes);
  // Fills the receive buffer with a value no collective leaves, so one that writes nothing fails.
  void poison(size_t bytes);
  // The first `bytes` of the receive buffer, in host memory.
  const void* results(size_t bytes);
  // After a collective's request completed: waits for a stream-ordered one to have run.
  void drain() const;

 private:
  struct Free {
    void operator()(void* p) const;
  };
  using Host = std::unique_ptr<void, Free>;
  static Host host_buffer(size_t bytes);

  const DeviceRig* rig_;
  Host host_send_, host_recv_, expected_;
  std::unique_ptr<DeviceBuffer> send_, recv_;
};

}  // namespace dlhost
