// onednn_compat.h — the few pieces of oneDNN's C++ API that differ between v2 (Debian's 2.6,
// the cpu_onednn backend) and v3 (the PyPI 3.x wheel, cpu_onednn3), so that one plugin source
// compiles against both. Everything version-dependent lives here; the layers call these helpers.
//
// What v3 changed (oneDNN's "Transition from v2.x to v3.0" guide): operation descriptors are
// gone, a primitive descriptor is built from the engine and the operation's parameters directly
// (engine first, then the v2 descriptor's arguments, then the forward hint, attributes and
// allow_empty); eltwise, batch/LRN normalization and softmax take separate src and dst (or
// diff_src and diff_dst) descriptors where v2 took one; pooling always takes a dilation;
// logsoftmax became softmax with algorithm::softmax_log; a post-op eltwise lost its scale;
// memory::desc::dims() became get_dims(); the Xeon Phi ISAs left cpu_isa and new ones came.
#ifndef DLHOST_CPU_ONEDNN_ONEDNN_COMPAT_H
#define DLHOST_CPU_ONEDNN_ONEDNN_COMPAT_H

#include "oneapi/dnnl/dnnl.hpp"

#if DNNL_VERSION_MAJOR < 2 || DNNL_VERSION_MAJOR > 3
#error "cpu_onednn builds against oneDNN 2.x or 3.x"
#endif

namespace dlhost::cpu_onednn::compat {

using Md = dnnl::memory::desc;
using dims = dnnl::memory::dims;

// A forward (or hint-less) primitive descriptor of primitive P from what v2's P::desc took.
template <class P, class... Args>
typename P::primitive_desc make_pd(const dnnl::engine& engine, const dnnl::primitive_attr& attr,
                                   bool allow_empty, const Args&... args) {
#if DNNL_VERSION_MAJOR >= 3
  return typename P::primitive_desc(engine, args..., attr, allow_empty);
#else
  return typename P::primitive_desc(typename P::desc(args...), attr, engine, allow_empty);
#endif
}

// A backward primitive descriptor of P, with its forward hint, from what v2's P::desc took.
template <class P, class Hint, class... Args>
typename P::primitive_desc make_bwd_pd(const dnnl::engine& engine, const dnnl::primitive_attr& attr,
                                       const Hint& hint, bool allow_empty, const Args&... args) {
#if DNNL_VERSION_MAJOR >= 3
  return typename P::primitive_desc(engine, args..., hint, attr, allow_empty);
#else
  return typename P::primitive_desc(typename P::desc(args...), attr, engine, hint, allow_empty);
#endif
}

// Eltwise forward in place or not: v2 has one data descriptor (dst is src's).
inline dnnl::eltwise_forward::primitive_desc eltwise_forward_pd(const dnnl::engine& engine,
                                                                const dnnl::primitive_attr& attr,
                                                                dnnl::algorithm alg, const Md& src,
                                                                const Md& dst, float alpha,
                                                                float beta) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, dnnl::prop_kind::forward_training, alg, src, dst, alpha, beta, attr};
#else
  (void)dst;
  return {{dnnl::prop_kind::forward_training, alg, src, alpha, beta}, attr, engine};
#endif
}

// Eltwise backward; `data` is the forward's src or dst (as the algorithm wants); v2 has one
// diff descriptor for diff_src and diff_dst.
inline dnnl::eltwise_backward::primitive_desc eltwise_backward_pd(
    const dnnl::engine& engine, const dnnl::primitive_attr& attr, dnnl::algorithm alg,
    const Md& diff_src, const Md& diff_dst, const Md& data, float alpha, float beta,
    const dnnl::eltwise_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, diff_src, diff_dst, data, alpha, beta, hint, attr};
#else
  (void)diff_src;
  return {{alg, diff_dst, data, alpha, beta}, attr, engine, hint};
#endif
}

// Batch or layer normalization, P its forward primitive (they take the same parameters):
// v2 has one data descriptor.
template <class P>
typename P::primitive_desc normalization_forward_pd(const dnnl::engine& engine,
                                                    const dnnl::primitive_attr& attr, const Md& src,
                                                    const Md& dst, float epsilon,
                                                    dnnl::normalization_flags flags) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, dnnl::prop_kind::forward_training, src, dst, epsilon, flags, attr};
#else
  (void)dst;
  return {{dnnl::prop_kind::forward_training, src, epsilon, flags}, attr, engine};
#endif
}

// Its backward, P the backward primitive: v2 has one diff descriptor.
template <class P, class Hint>
typename P::primitive_desc normalization_backward_pd(const dnnl::engine& engine,
                                                     const dnnl::primitive_attr& attr,
                                                     const Md& diff_src, const Md& diff_dst,
                                                     const Md& src, float epsilon,
                                                     dnnl::normalization_flags flags,
                                                     const Hint& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, dnnl::prop_kind::backward, diff_src, diff_dst, src, epsilon, flags, hint, attr};
#else
  (void)diff_src;
  return {{dnnl::prop_kind::backward, diff_dst, src, epsilon, flags}, attr, engine, hint};
#endif
}

// Whether batch normalization backward must be given the shift it never reads (2.6 checks
// for it; 3.x fails the execution with invalid_arguments when it is there).
constexpr bool bnorm_backward_takes_shift = DNNL_VERSION_MAJOR < 3;

inline dnnl::lrn_forward::primitive_desc lrn_forward_pd(const dnnl::engine& engine,
                                                        const dnnl::primitive_attr& attr,
                                                        dnnl::algorithm alg, const Md& src,
                                                        const Md& dst, int64_t size, float alpha,
                                                        float beta, float k) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, dnnl::prop_kind::forward_training, alg, src, dst, size, alpha, beta, k, attr};
#else
  (void)dst;
  return {{dnnl::prop_kind::forward_training, alg, src, size, alpha, beta, k}, attr, engine};
#endif
}

inline dnnl::lrn_backward::primitive_desc lrn_backward_pd(
    const dnnl::engine& engine, const dnnl::primitive_attr& attr, dnnl::algorithm alg,
    const Md& diff_src, const Md& diff_dst, const Md& src, int64_t size, float alpha, float beta,
    float k, const dnnl::lrn_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, alg, diff_src, diff_dst, src, size, alpha, beta, k, hint, attr};
#else
  (void)diff_src;
  return {{alg, src, diff_dst, size, alpha, beta, k}, attr, engine, hint};
#endif
}

// Pooling without dilation (v3 always takes one: zeros).
inline dnnl::pooling_forward::primitive_desc pooling_forward_pd(
    const dnnl::engine& engine, const dnnl::primitive_attr& attr, dnnl::algorithm alg,
    const Md& src, const Md& dst, const dims& strides, const dims& kernel, const dims& padding_l,
    const dims& padding_r) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine,    dnnl::prop_kind::forward_training,
          alg,       src,
          dst,       strides,
          kernel,    dims(kernel.size(), 0),
          padding_l, padding_r,
          attr};
#else
  return {{dnnl::prop_kind::forward_training, alg, src, dst, strides, kernel, padding_l, padding_r},
          attr,
          engine};
#endif
}

inline dnnl::pooling_backward::primitive_desc pooling_backward_pd(
    const dnnl::engine& engine, const dnnl::primitive_attr& attr, dnnl::algorithm alg,
    const Md& diff_src, const Md& diff_dst, const dims& strides, const dims& kernel,
    const dims& padding_l, const dims& padding_r,
    const dnnl::pooling_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine,    alg,       diff_src, diff_dst, strides, kernel, dims(kernel.size(), 0),
          padding_l, padding_r, hint,     attr};
#else
  return {{alg, diff_src, diff_dst, strides, kernel, padding_l, padding_r}, attr, engine, hint};
#endif
}

// Log-softmax along `axis`: its own primitive in v2, softmax with softmax_log in v3.
#if DNNL_VERSION_MAJOR >= 3
using logsoftmax_forward = dnnl::softmax_forward;
#else
using logsoftmax_forward = dnnl::logsoftmax_forward;
#endif

inline logsoftmax_forward::primitive_desc logsoftmax_forward_pd(const dnnl::engine& engine,
                                                                const dnnl::primitive_attr& attr,
                                                                const Md& src, const Md& dst,
                                                                int axis, bool allow_empty) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine,
          dnnl::prop_kind::forward_training,
          dnnl::algorithm::softmax_log,
          src,
          dst,
          axis,
          attr,
          allow_empty};
#else
  (void)dst;
  return {{dnnl::prop_kind::forward_training, src, axis}, attr, engine, allow_empty};
#endif
}

// Softmax along `axis` (v2.6's softmax_forward has one data descriptor and no algorithm; v3's
// takes softmax_accurate, src and dst).
inline dnnl::softmax_forward::primitive_desc softmax_forward_pd(const dnnl::engine& engine,
                                                                const dnnl::primitive_attr& attr,
                                                                const Md& src, const Md& dst,
                                                                int axis) {
#if DNNL_VERSION_MAJOR >= 3
  return {
      engine, dnnl::prop_kind::forward_training, dnnl::algorithm::softmax_accurate, src, dst, axis,
      attr};
#else
  (void)dst;
  return {{dnnl::prop_kind::forward_training, src, axis}, attr, engine};
#endif
}

// Softmax backward from the forward's dst (v2: one diff descriptor for diff_src and diff_dst).
inline dnnl::softmax_backward::primitive_desc softmax_backward_pd(
    const dnnl::engine& engine, const dnnl::primitive_attr& attr, const Md& diff_src,
    const Md& diff_dst, const Md& dst, int axis,
    const dnnl::softmax_forward::primitive_desc& hint) {
#if DNNL_VERSION_MAJOR >= 3
  return {engine, dnnl::algorithm::softmax_accurate, diff_src, diff_dst, dst, axis, hint, attr};
#else
  (void)diff_src;
  return {{diff_dst, dst, axis}, attr, engine, hint};
#endif
}

// An eltwise post-op (v2's leading scale, always 1 here, is gone in v3).
inline void append_eltwise(dnnl::post_ops& ops, dnnl::algorithm alg, float alpha, float beta) {
#if DNNL_VERSION_MAJOR >= 3
  ops.append_eltwise(alg, alpha, beta);
#else
  ops.append_eltwise(1.0f, alg, alpha, beta);
#endif
}

inline dims dims_of(const Md& md) {
#if DNNL_VERSION_MAJOR >= 3
  return md.get_dims();
#else
  return md.dims();
#endif
}

// The name of the ISA oneDNN dispatches, as the record's device says it.
inline const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
#if DNNL_VERSION_MAJOR >= 3
    case dnnl::cpu_isa::avx2_vnni_2:
      return "avx2_vnni_2";
    case dnnl::cpu_isa::avx512_core_fp16:
      return "avx512_core_fp16";
    case dnnl::cpu_isa::avx512_core_amx_fp16:
      return "avx512_core_amx_fp16";
#else
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
#endif
    default:
      return "any";
  }
}

}  // namespace dlhost::cpu_onednn::compat

#endif  // DLHOST_CPU_ONEDNN_ONEDNN_COMPAT_H
