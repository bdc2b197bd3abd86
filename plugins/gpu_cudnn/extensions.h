// extensions.h — gpu_cudnn's device side as the backend kit's device virtuals (Backend::
// device_virtuals(); docs/plugin-sdk.md, "Device backends"): the kit publishes the stream, events
// and device memory extensions (dlhost_device.h) in the one chain with capabilities, option schema
// and tensor reads, checks every handle and out-parameter, and turns exceptions into statuses.
// Here is only what CUDA does: the model-level virtuals are Model's (model.h, defined in
// extensions.cpp); the context-level ones (buffers for the host's own use, pinned host memory,
// copies with no model) are these functions, called by GpuBackend's overrides (plugin.cpp).
#ifndef DLHOST_GPU_CUDNN_EXTENSIONS_H
#define DLHOST_GPU_CUDNN_EXTENSIONS_H

#include "model.h"

namespace dlhost::gpu_cudnn {

// cudaMalloc on the context's device, described as a device buffer.
dlhost_buffer alloc_device_buffer(const Context& context, uint64_t bytes, int32_t dtype);
void free_device_buffer(const Context& context, const dlhost_buffer& buffer);
// cudaMallocHost / cudaFreeHost: page-locked, so the host's copies can be asynchronous.
void* alloc_pinned(const Context& context, uint64_t bytes);
void free_pinned(void* data);
// Copies with no model: on the legacy default stream (after all of the device's work), waited
// for; [offset, offset + bytes) must lie in the device buffer (OUT_OF_RANGE).
void copy_to_host_unordered(const Context& context, const dlhost_buffer& src, uint64_t offset,
                            void* dst, uint64_t bytes);
void copy_from_host_unordered(const Context& context, const void* src, const dlhost_buffer& dst,
                              uint64_t offset, uint64_t bytes);

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_EXTENSIONS_H
