// max_pool.cpp — the max pooling kernels of max_pool.h. A group of 16, 8 or 1 channels at a
// pixel is one GCC vector; each entry point is compiled for AVX-512, AVX2 and baseline x86-64
// and picked at load time (target_clones), so the plugin stays portable and still gets wide
// registers.
#include "max_pool.h"

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

// B channels of one image over the whole plane, pixels `step` floats apart (B when kDense: a
// channel block, where the compile-time stride makes the pass 0.85x the time): each output's
// window maximum and its index.
template <int B, bool kDense>
[[gnu::always_inline]] inline void forward_plane(const MaxPoolShape& s, const float* src,
                                                 float* dst, uint8_t* argmax, int64_t step) {
  using vf = typename Lanes<B>::f;
  using vi = typename Lanes<B>::i;
  using vb = typename Lanes<B>::b;
  const int64_t px = kDense ? B : step;
  for (int64_t oh = 0; oh < s.out_h; ++oh) {
    const int64_t h0 = oh * s.stride_h - s.pad_top;
    const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + s.kernel_h, s.in_h);
    for (int64_t ow = 0; ow < s.out_w; ++ow) {
      const int64_t w0 = ow * s.stride_w - s.pad_left;
      const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + s.kernel_w, s.in_w);
      vf best;
      __builtin_memcpy(&best, src + (h_lo * s.in_w + w_lo) * px, sizeof best);
      vi index = vi{} + static_cast<int32_t>((h_lo - h0) * s.kernel_w + (w_lo - w0));
      for (int64_t h = h_lo; h < h_hi; ++h)
        for (int64_t w = w_lo; w < w_hi; ++w) {
          vf v;
          __builtin_memcpy(&v, src + (h * s.in_w + w) * px, sizeof v);
          const int32_t k = static_cast<int32_t>((h - h0) * s.kernel_w + (w - w0));
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
}

// B channels of one image's gradient: input (ih, iw) collects diff_dst from the windows
// [oh_lo, oh_hi] x [ow_lo, ow_hi] that cover it, where their argmax names it.
template <int B, bool kDense>
[[gnu::always_inline]] inline void backward_plane(const MaxPoolShape& s, const float* diff_dst,
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
std::vector<std::pair<int64_t, int>> channel_groups(const MaxPoolShape& s) {
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

// The tensor as planes that one thread each takes whole: an image's channel block, or a
// channels-last image; `step` floats from pixel to pixel, `*_size` floats per plane.
struct Planes {
  explicit Planes(const MaxPoolShape& s)
      : step(s.channels_last ? s.channels : s.block),
        count(s.channels_last ? s.batch : s.batch * s.channel_blocks),
        in_size(s.in_h * s.in_w * step),
        out_size(s.out_h * s.out_w * step) {}
  int64_t step, count, in_size, out_size;
};

}  // namespace

bool max_pool_supported(const MaxPoolShape& s) {
  if (s.channels_last ? s.channels < 1 : s.block != 8 && s.block != 16) return false;
  if (s.kernel_h * s.kernel_w > 256 || s.stride_h < 1 || s.stride_w < 1) return false;
  if (s.pad_top < 0 || s.pad_left < 0 || s.pad_top >= s.kernel_h || s.pad_left >= s.kernel_w)
    return false;
  // The last window starts inside the input: none is all padding.
  return (s.out_h - 1) * s.stride_h - s.pad_top < s.in_h &&
         (s.out_w - 1) * s.stride_w - s.pad_left < s.in_w;
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void max_pool_forward(
    const MaxPoolShape& s, const float* src, float* dst, uint8_t* argmax) {
  const auto groups = channel_groups(s);
  const Planes pl(s);
  const int64_t step = pl.step, in_plane = pl.in_size, out_plane = pl.out_size;
#pragma omp parallel for schedule(static) if (pl.count * in_plane > kParallelMin)
  for (int64_t p = 0; p < pl.count; ++p)
    for (const auto& [c, lanes] : groups) {
      const float* x = src + p * in_plane + c;
      float* y = dst + p * out_plane + c;
      uint8_t* k = argmax + p * out_plane + c;
      by_lanes(lanes, [&](auto b) {
        if (s.channels_last)
          forward_plane<decltype(b)::value, false>(s, x, y, k, step);
        else
          forward_plane<decltype(b)::value, true>(s, x, y, k, step);
      });
    }
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void
max_pool_backward(const MaxPoolShape& s, const float* diff_dst, const uint8_t* argmax,
                  float* diff_src) {
  const std::vector<int64_t> oh_range =
      covering_outputs(s.in_h, s.out_h, s.kernel_h, s.stride_h, s.pad_top);
  const std::vector<int64_t> ow_range =
      covering_outputs(s.in_w, s.out_w, s.kernel_w, s.stride_w, s.pad_left);
  const auto groups = channel_groups(s);
  const Planes pl(s);
  const int64_t step = pl.step, in_plane = pl.in_size, out_plane = pl.out_size;
#pragma omp parallel for schedule(static) if (pl.count * in_plane > kParallelMin)
  for (int64_t p = 0; p < pl.count; ++p)
    for (const auto& [c, lanes] : groups) {
      const float* dy = diff_dst + p * out_plane + c;
      const uint8_t* k = argmax + p * out_plane + c;
      float* dx = diff_src + p * in_plane + c;
      const int64_t* hr = oh_range.data();
      const int64_t* wr = ow_range.data();
      by_lanes(lanes, [&](auto b) {
        if (s.channels_last)
          backward_plane<decltype(b)::value, false>(s, dy, k, dx, step, hr, wr);
        else
          backward_plane<decltype(b)::value, true>(s, dy, k, dx, step, hr, wr);
      });
    }
}

}  // namespace dlhost::cpu_onednn
