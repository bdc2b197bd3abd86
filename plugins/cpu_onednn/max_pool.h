// max_pool.h — cpu_onednn's own max pooling over channel-blocked tensors (oneDNN's aBcd16b and
// aBcd8b: [N][C/B][H][W][B]) and channels-last ones (acdb: [N][H][W][C]). oneDNN 2.6's training max
// pooling runs at half of what the memory allows (AlexNet-R's pool1 at batch 1024, one thread on
// avx512_core_amx: forward 30 ms against 14.5 for its own inference forward, backward 32 ms); these
// run at 16 and 18 ms. The forward keeps one byte per output, the index of the window's first
// maximum (what oneDNN's workspace holds); the backward gathers into every input element once, from
// the few windows that cover it, so the input gradient is written once instead of zeroed and then
// scattered into. Internal to the plugin; the functions are reentrant and split their work over
// OpenMP threads.
#ifndef DLHOST_CPU_ONEDNN_MAX_POOL_H
#define DLHOST_CPU_ONEDNN_MAX_POOL_H

#include <cstdint>

namespace dlhost::cpu_onednn {

// The geometry of one max pooling, in the graph's words. Channels: `channels_last` with
// `channels` per pixel, or in `channel_blocks` blocks of `block` lanes (the last block padded, as
// oneDNN pads it). Padding on the right/bottom is implied by the output size (ceil mode):
// windows are clipped to the input.
struct MaxPoolShape {
  int64_t batch = 0;
  bool channels_last = false;
  int64_t channels = 0, channel_blocks = 0, block = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 0, stride_w = 0, pad_top = 0, pad_left = 0;
};

// Whether these kernels take the shape: channels last, or blocks of 8 or 16 lanes; a window of
// at most 256 elements (a byte per index); every window holding at least one input element.
bool max_pool_supported(const MaxPoolShape& s);

// dst = the maximum of each window, argmax = its first maximum's index in the window
// (row-major, kernel_w per row), both in the source's layout.
void max_pool_forward(const MaxPoolShape& s, const float* src, float* dst, uint8_t* argmax);

// diff_src = for each input element, the sum of diff_dst over the windows whose argmax it is,
// in the source's layout, every element written.
void max_pool_backward(const MaxPoolShape& s, const float* diff_dst, const uint8_t* argmax,
                       float* diff_src);

}  // namespace dlhost::cpu_onednn

#endif  // DLHOST_CPU_ONEDNN_MAX_POOL_H
