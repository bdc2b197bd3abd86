// pooling.cpp — the pooling kernels of pooling.h. A group of 16, 8 or 1 channels at a pixel is
// one GCC vector; each pass over a plane is compiled for AVX-512, AVX2 and baseline x86-64 and
// picked at load time (target_clones), so the plugin stays portable and still gets wide
// registers.
#include "pooling.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "layers.h"

namespace dlhost::cpu_onednn {

namespace {

// B channels as GCC vectors: floats, 32-bit integers (compare masks) and bytes.
template <int B>
struct Lanes;
template <>
struct Lanes<16> {
  typedef float f __attribute__((vector_size(64)));
  typedef int32_t i __attribute__((vector_size(64)));
  typedef uint8_t b __attribute__((vector_size(16)));
};
template <>
struct Lanes<8> {
  typedef float f __attribute__((vector_size(32)));
  typedef int32_t i __attribute__((vector_size(32)));
  typedef uint8_t b __attribute__((vector_size(8)));
};
template <>
struct Lanes<1> {
  typedef float f __attribute__((vector_size(4)));
  typedef int32_t i __attribute__((vector_size(4)));
  typedef uint8_t b __attribute__((vector_size(1)));
};

// Output (oh, ow)'s window: it starts at (h0, w0), padding included, and holds the input rows
// [h_lo, h_hi) and columns [w_lo, w_hi).
struct Window {
  Window(const PoolShape& s, int64_t oh, int64_t ow)
      : h0(oh * s.stride_h - s.pad_top),
        w0(ow * s.stride_w - s.pad_left),
        h_lo(std::max<int64_t>(h0, 0)),
        h_hi(std::min(h0 + s.kernel_h, s.in_h)),
        w_lo(std::max<int64_t>(w0, 0)),
        w_hi(std::min(w0 + s.kernel_w, s.in_w)),
        kernel_w(s.kernel_w) {}
  // Input (h, w)'s place in the window, row-major: what the max keeps as its argmax.
  int32_t index(int64_t h, int64_t w) const {
    return static_cast<int32_t>((h - h0) * kernel_w + (w - w0));
  }
  int64_t h0, w0, h_lo, h_hi, w_lo, w_hi, kernel_w;
};

// B channels of one image over the whole plane, pixels `step` floats apart (B when kDense):
// each output's window maximum and its index.
template <int B, bool kDense>
[[gnu::always_inline]] inline void max_forward_plane(const PoolShape& s, const float* src,
                                                     float* dst, uint8_t* argmax, int64_t step) {
  using vf = typename Lanes<B>::f;
  using vi = typename Lanes<B>::i;
  using vb = typename Lanes<B>::b;
  const int64_t px = kDense ? B : step;
  for (int64_t oh = 0; oh < s.out_h; ++oh)
    for (int64_t ow = 0; ow < s.out_w; ++ow) {
      const Window win(s, oh, ow);
      vf best;
      __builtin_memcpy(&best, src + (win.h_lo * s.in_w + win.w_lo) * px, sizeof best);
      vi index = vi{} + win.index(win.h_lo, win.w_lo);
      for (int64_t h = win.h_lo; h < win.h_hi; ++h)
        for (int64_t w = win.w_lo; w < win.w_hi; ++w) {
          vf v;
          __builtin_memcpy(&v, src + (h * s.in_w + w) * px, sizeof v);
          const int32_t k = win.index(h, w);
          // Strictly greater: ties keep the first maximum, as oneDNN's workspace does.
          const vi greater = v > best;
          best = greater ? v : best;
          index = greater ? vi{} + k : index;
        }
      const int64_t o = (oh * s.out_w + ow) * px;
      __builtin_memcpy(dst + o, &best, sizeof best);
      const vb bytes = __builtin_convertvector(index, vb);
      __builtin_memcpy(argmax + o, &bytes, sizeof bytes);
    }
}

// B channels of one image's gradient: input (ih, iw) collects diff_dst from the windows
// [oh_lo, oh_hi] x [ow_lo, ow_hi] that cover it, where their argmax names it.
template <int B, bool kDense>
[[gnu::always_inline]] inline void max_backward_plane(const PoolShape& s, const float* diff_dst,
                                                      const uint8_t* argmax, float* diff_src,
                                                      int64_t step, const int64_t* oh_range,
                                                      const int64_t* ow_range) {
  using vf = typename Lanes<B>::f;
  using vi = typename Lanes<B>::i;
  const int64_t px = kDense ? B : step;
  for (int64_t ih = 0; ih < s.in_h; ++ih)
    for (int64_t iw = 0; iw < s.in_w; ++iw) {
      vf sum = {};
      for (int64_t oh = oh_range[2 * ih]; oh <= oh_range[2 * ih + 1]; ++oh)
        for (int64_t ow = ow_range[2 * iw]; ow <= ow_range[2 * iw + 1]; ++ow) {
          const int64_t o = (oh * s.out_w + ow) * px;
          const int32_t k = static_cast<int32_t>((ih - (oh * s.stride_h - s.pad_top)) * s.kernel_w +
                                                 (iw - (ow * s.stride_w - s.pad_left)));
          vf g;
          __builtin_memcpy(&g, diff_dst + o, sizeof g);
          // Element by element: GCC makes this one zero-extending load, where its
          // __builtin_convertvector of a byte vector goes lane by lane through general
          // registers (the whole backward 2.7x slower). The same happens to any further mask
          // combined here (a fused ReLU's: 8x slower), so the ReLU mask stays a separate pass.
          vi index;
          for (int l = 0; l < B; ++l) index[l] = argmax[o + l];
          sum += index == k ? g : vf{};
        }
      __builtin_memcpy(diff_src + (ih * s.in_w + iw) * px, &sum, sizeof sum);
    }
}

// B channels of one image over the whole plane: each output the mean of its window's input
// elements, as their sum times 1 / count.
template <int B, bool kDense>
[[gnu::always_inline]] inline void avg_forward_plane(const PoolShape& s, const float* src,
                                                     float* dst, int64_t step,
                                                     const float* inv_count) {
  using vf = typename Lanes<B>::f;
  const int64_t px = kDense ? B : step;
  for (int64_t oh = 0; oh < s.out_h; ++oh)
    for (int64_t ow = 0; ow < s.out_w; ++ow) {
      const Window win(s, oh, ow);
      vf sum = {};
      for (int64_t h = win.h_lo; h < win.h_hi; ++h)
        for (int64_t w = win.w_lo; w < win.w_hi; ++w) {
          vf v;
          __builtin_memcpy(&v, src + (h * s.in_w + w) * px, sizeof v);
          sum += v;
        }
      sum *= inv_count[oh * s.out_w + ow];
      __builtin_memcpy(dst + (oh * s.out_w + ow) * px, &sum, sizeof sum);
    }
}

// B channels of one image's gradient: input (ih, iw) collects diff_dst / count from every window
// that holds it.
template <int B, bool kDense>
[[gnu::always_inline]] inline void avg_backward_plane(const PoolShape& s, const float* diff_dst,
                                                      float* diff_src, int64_t step,
                                                      const int64_t* oh_range,
                                                      const int64_t* ow_range,
                                                      const float* inv_count) {
  using vf = typename Lanes<B>::f;
  const int64_t px = kDense ? B : step;
  for (int64_t ih = 0; ih < s.in_h; ++ih)
    for (int64_t iw = 0; iw < s.in_w; ++iw) {
      vf sum = {};
      for (int64_t oh = oh_range[2 * ih]; oh <= oh_range[2 * ih + 1]; ++oh)
        for (int64_t ow = ow_range[2 * iw]; ow <= ow_range[2 * iw + 1]; ++ow) {
          vf g;
          __builtin_memcpy(&g, diff_dst + (oh * s.out_w + ow) * px, sizeof g);
          sum += g * inv_count[oh * s.out_w + ow];
        }
      __builtin_memcpy(diff_src + (ih * s.in_w + iw) * px, &sum, sizeof sum);
    }
}

// For each input index i in [0, in): the first and last output whose window covers it.
std::vector<int64_t> covering_outputs(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                                      int64_t pad) {
  std::vector<int64_t> range(2 * in);
  for (int64_t i = 0; i < in; ++i) {
    // Window o covers i when o * stride - pad <= i < o * stride - pad + kernel.
    const int64_t last = (i + pad) / stride;
    int64_t first = i + pad - kernel + 1;
    first = first <= 0 ? 0 : (first + stride - 1) / stride;
    range[2 * i] = first;
    range[2 * i + 1] = std::min(last, out - 1);
  }
  return range;
}

// The channel groups of one plane that a pass takes together, as (first channel, lanes): the
// one block of a blocked plane; a channels-last image's channels by 16, then 8, and a last group
// of 8 that overlaps the one before (its channels computed twice, to the same values) rather
// than one-lane passes over the plane (LeNet's 20 channels: the backward 2x slower that way).
// Under 8 channels, one lane at a time.
std::vector<std::pair<int64_t, int>> channel_groups(const PoolShape& s) {
  if (!s.channels_last) return {{0, static_cast<int>(s.block)}};
  std::vector<std::pair<int64_t, int>> groups;
  int64_t c = 0;
  for (; c + 16 <= s.channels; c += 16) groups.emplace_back(c, 16);
  for (; c + 8 <= s.channels; c += 8) groups.emplace_back(c, 8);
  if (c < s.channels && s.channels >= 8)
    groups.emplace_back(s.channels - 8, 8);
  else
    for (; c < s.channels; ++c) groups.emplace_back(c, 1);
  return groups;
}

// Calls body with std::integral_constant<int, lanes> for 16, 8 or 1 lanes.
template <class Body>
[[gnu::always_inline]] inline void by_lanes(int lanes, Body&& body) {
  if (lanes == 16)
    body(std::integral_constant<int, 16>{});
  else if (lanes == 8)
    body(std::integral_constant<int, 8>{});
  else
    body(std::integral_constant<int, 1>{});
}

// What the passes of one call share: the tensor as planes that one thread each takes whole (an
// image's channel block, or a channels-last image), `step` floats from pixel to pixel and
// `*_plane` floats per plane; the channel groups of a plane; for the backward passes the outputs
// covering each input row and column; for the average, 1 / (window elements inside the input)
// per output position.
struct Tables {
  Tables(const PoolShape& s, bool backward, bool average)
      : step(s.channels_last ? s.channels : s.block),
        planes(s.channels_last ? s.batch : s.batch * s.channel_blocks),
        in_plane(s.in_h * s.in_w * step),
        out_plane(s.out_h * s.out_w * step),
        groups(channel_groups(s)) {
    if (backward) {
      oh_range = covering_outputs(s.in_h, s.out_h, s.kernel_h, s.stride_h, s.pad_top);
      ow_range = covering_outputs(s.in_w, s.out_w, s.kernel_w, s.stride_w, s.pad_left);
    }
    if (!average) return;
    inv_count.resize(s.out_h * s.out_w);
    for (int64_t oh = 0; oh < s.out_h; ++oh)
      for (int64_t ow = 0; ow < s.out_w; ++ow) {
        const Window win(s, oh, ow);
        const int64_t count = (win.h_hi - win.h_lo) * (win.w_hi - win.w_lo);
        inv_count[oh * s.out_w + ow] = 1.0f / static_cast<float>(count);
      }
  }
  int64_t step, planes, in_plane, out_plane;
  std::vector<std::pair<int64_t, int>> groups;
  std::vector<int64_t> oh_range, ow_range;
  std::vector<float> inv_count;
};

// Calls fn(plane, first channel, lanes) for every channel group of every plane, planes split
// over the threads.
template <class Fn>
void for_each_group(const Tables& t, Fn&& fn) {
#pragma omp parallel for schedule(static) if (t.planes * t.in_plane > kParallelMin)
  for (int64_t p = 0; p < t.planes; ++p)
    for (const auto& [c, lanes] : t.groups) fn(p, c, lanes);
}

// One channel group's pass over a plane, per ISA. Pixels are t.step floats apart, or exactly the
// lanes (kDense: a channel block), where the compile-time stride makes the pass 0.85x the time.
#define DLHOST_POOL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

DLHOST_POOL_CLONES void max_forward_group(const PoolShape& s, const Tables& t, const float* x,
                                          float* y, uint8_t* k, int lanes) {
  by_lanes(lanes, [&](auto b) {
    if (s.channels_last)
      max_forward_plane<decltype(b)::value, false>(s, x, y, k, t.step);
    else
      max_forward_plane<decltype(b)::value, true>(s, x, y, k, t.step);
  });
}

DLHOST_POOL_CLONES void max_backward_group(const PoolShape& s, const Tables& t, const float* dy,
                                           const uint8_t* k, float* dx, int lanes) {
  by_lanes(lanes, [&](auto b) {
    const int64_t* hr = t.oh_range.data();
    const int64_t* wr = t.ow_range.data();
    if (s.channels_last)
      max_backward_plane<decltype(b)::value, false>(s, dy, k, dx, t.step, hr, wr);
    else
      max_backward_plane<decltype(b)::value, true>(s, dy, k, dx, t.step, hr, wr);
  });
}

DLHOST_POOL_CLONES void avg_forward_group(const PoolShape& s, const Tables& t, const float* x,
                                          float* y, int lanes) {
  by_lanes(lanes, [&](auto b) {
    if (s.channels_last)
      avg_forward_plane<decltype(b)::value, false>(s, x, y, t.step, t.inv_count.data());
    else
      avg_forward_plane<decltype(b)::value, true>(s, x, y, t.step, t.inv_count.data());
  });
}

DLHOST_POOL_CLONES void avg_backward_group(const PoolShape& s, const Tables& t, const float* dy,
                                           float* dx, int lanes) {
  by_lanes(lanes, [&](auto b) {
    const int64_t* hr = t.oh_range.data();
    const int64_t* wr = t.ow_range.data();
    const float* inv = t.inv_count.data();
    if (s.channels_last)
      avg_backward_plane<decltype(b)::value, false>(s, dy, dx, t.step, hr, wr, inv);
    else
      avg_backward_plane<decltype(b)::value, true>(s, dy, dx, t.step, hr, wr, inv);
  });
}

#undef DLHOST_POOL_CLONES

}  // namespace

bool pool_supported(const PoolShape& s) {
  if (s.channels_last ? s.channels < 1 : s.block != 8 && s.block != 16) return false;
  if (s.kernel_h * s.kernel_w > 256 || s.stride_h < 1 || s.stride_w < 1) return false;
  if (s.pad_top < 0 || s.pad_left < 0 || s.pad_top >= s.kernel_h || s.pad_left >= s.kernel_w)
    return false;
  // The last window starts inside the input: none is all padding.
  return (s.out_h - 1) * s.stride_h - s.pad_top < s.in_h &&
         (s.out_w - 1) * s.stride_w - s.pad_left < s.in_w;
}

void max_pool_forward(const PoolShape& s, const float* src, float* dst, uint8_t* argmax) {
  const Tables t(s, false, false);
  for_each_group(t, [&](int64_t p, int64_t c, int lanes) {
    const int64_t o = p * t.out_plane + c;
    max_forward_group(s, t, src + p * t.in_plane + c, dst + o, argmax + o, lanes);
  });
}

void max_pool_backward(const PoolShape& s, const float* diff_dst, const uint8_t* argmax,
                       float* diff_src) {
  const Tables t(s, true, false);
  for_each_group(t, [&](int64_t p, int64_t c, int lanes) {
    const int64_t o = p * t.out_plane + c;
    max_backward_group(s, t, diff_dst + o, argmax + o, diff_src + p * t.in_plane + c, lanes);
  });
}

void avg_pool_forward(const PoolShape& s, const float* src, float* dst) {
  const Tables t(s, false, true);
  for_each_group(t, [&](int64_t p, int64_t c, int lanes) {
    avg_forward_group(s, t, src + p * t.in_plane + c, dst + p * t.out_plane + c, lanes);
  });
}

void avg_pool_backward(const PoolShape& s, const float* diff_dst, float* diff_src) {
  const Tables t(s, true, true);
  for_each_group(t, [&](int64_t p, int64_t c, int lanes) {
    avg_backward_group(s, t, diff_dst + p * t.out_plane + c, diff_src + p * t.in_plane + c, lanes);
  });
}

}  // namespace dlhost::cpu_onednn
