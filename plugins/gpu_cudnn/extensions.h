// extensions.h — gpu_cudnn's device extensions (dlhost_device.h): the model's stream, events on
// it, and device memory (statistics, buffers, copies host<->device and device<->device, input
// buffers, pinned host memory). Capabilities, the option schema and tensor reads are declared
// through the backend kit (plugin.cpp), which links these into the same chain.
#ifndef DLHOST_GPU_CUDNN_EXTENSIONS_H
#define DLHOST_GPU_CUDNN_EXTENSIONS_H

#include "dlhost/backend_kit.hpp"

namespace dlhost::gpu_cudnn {

// Links the stream, events and device memory tables (static: they live as long as the library).
void link_extensions(sdk::ExtensionChain& chain);

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_EXTENSIONS_H
