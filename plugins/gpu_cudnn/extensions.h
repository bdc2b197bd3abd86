// extensions.h — gpu_cudnn's ABI 1.2 extensions (dlhost_device.h): capabilities, the model's
// stream, events on it, device memory (statistics, buffers, copies, pinned host memory) and the
// option schema, chained for dlhost_plugin.extensions.
#ifndef DLHOST_GPU_CUDNN_EXTENSIONS_H
#define DLHOST_GPU_CUDNN_EXTENSIONS_H

#include "dlhost/dlhost_device.h"

namespace dlhost::gpu_cudnn {

// The head of the chain; every table in it lives as long as the library.
const dlhost_extension* extension_chain();

}  // namespace dlhost::gpu_cudnn

#endif  // DLHOST_GPU_CUDNN_EXTENSIONS_H
