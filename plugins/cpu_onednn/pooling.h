// pooling.h — cpu_onednn's own pooling kernels, max and exclude-padding average, over
// channel-blocked tensors (oneDNN's aBcd16b and aBcd8b: [N][C/B][H][W][B]) and channels-last ones
// (acdb: [N][H][W][C]). oneDNN 2.6's training pooling runs at half of what the memory allows or
// less (1 thread, avx512_core_amx: AlexNet-R's max pool1 at batch 1024 forward 30 ms against 14.5
// for its own inference forward, backward 32 ms; its average pool3, 17 MB in, forward 6.4 ms and
// backward 8.3). The max forward keeps one byte per output, the index of the window's first
// maximum (what oneDNN's workspace holds); both backwards gather into every input element once,
// from the few windows that cover it, so the input gradient is written once instead of zeroed and
// then scattered into.
// Internal to the plugin; the functions are reentrant and split their work over OpenMP threads.
#ifndef DLHOST_CPU_ONEDNN_POOLING_H
#define DLHOST_CPU_ONEDNN_POOLING_H

#include <cstdint>

namespace dlhost::cpu_onednn {

// The geometry of one pooling, in the graph's words. Channels: `channels_last` with `channels`
// per pixel, or in `channel_blocks` blocks of `block` lanes (the last block padded, as oneDNN
// pads it). Padding on the right/bottom is implied by the output size (ceil mode): windows are
// clipped to the input.
struct PoolShape {
  int64_t batch = 0;
  bool channels_last = false;
  int64_t channels = 0, channel_blocks = 0, block = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 0, stride_w = 0, pad_top = 0, pad_left = 0;
};

// Whether these kernels take the shape: channels last, or blocks of 8 or 16 lanes; a window of
// at most 256 elements (a byte per max index); every window holding at least one input element.
bool pool_supported(const PoolShape& s);

// dst = the maximum of each window, argmax = its first maximum's index in the window
// (row-major, kernel_w per row), both in the source's layout.
void max_pool_forward(const PoolShape& s, const float* src, float* dst, uint8_t* argmax);

// diff_src = for each input element, the sum of diff_dst over the windows whose argmax it is,
// in the source's layout, every element written.
void max_pool_backward(const PoolShape& s, const float* diff_dst, const uint8_t* argmax,
                       float* diff_src);

// dst = the mean of each window's input elements (padding excluded from the count).
void avg_pool_forward(const PoolShape& s, const float* src, float* dst);

// diff_src = for each input element, the sum of diff_dst / count over the windows that hold it,
// every element written.
void avg_pool_backward(const PoolShape& s, const float* diff_dst, float* diff_src);

}  // namespace dlhost::cpu_onednn

#endif  // DLHOST_CPU_ONEDNN_POOLING_H
