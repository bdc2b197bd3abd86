// layers_dense.cpp — fully connected layers on cuBLAS GEMM (layers.h's row-major gemm, in the
// case's precision), the residual add on cuBLAS, and the ops no library has,
// on the plugin's kernels: dropout, embedding, the softmax cross-entropy (cuDNN's log-softmax,
// then the plugin's gather and mean) and MSE.
#include "kernels.h"
#include "layers.h"

namespace dlhost::gpu_cudnn {
namespace {

int to_int(int64_t v) { return static_cast<int>(v); }

}  // namespace

BackwardBuilder fc_layer(Model& m, Tensor& in, Tensor& out, int64_t rows, int64_t k, int64_t n,
                         Param& w, Param* b) {
  m.need_ones(rows);
  // Y [rows, n] = X [rows, k] W^T (W [n, k]); bias: Y^T += b 1^T.
  m.add_forward(
      [&m, rows, k, n, x = in.value, y = out.value, W = w.value, B = b ? b->value : nullptr] {
        gemm(m, {false, true, rows, n, k}, 1.0f, {x, k}, {W, k}, 0.0f, y, n, 0, "fc forward");
        if (B != nullptr) {
          const float one = 1;
          check_cublas(cublasSgemm(m.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, to_int(n), to_int(rows), 1,
                                   &one, B, to_int(n), m.ones(), 1, &one, y, to_int(n)),
                       "cublasSgemm (fc bias)");
        }
      });
  return [&m, rows, k, n, &in, &out, &w, b] {
    const float beta = in.grad != nullptr ? m.beta_for(in) : 0.0f;
    // A tied table read by a later layer already has that layer's share (written first).
    const float beta_w = w.grad_written ? 1.0f : 0.0f;
    w.grad_written = true;
    m.add_backward([&m, rows, k, n, beta, beta_w, x = in.value, dx = in.grad, dy = out.grad,
                    W = w.value, dW = w.grad, dB = b ? b->grad : nullptr] {
      // dW [n, k] = dY^T X.
      gemm(m, {true, false, n, k, rows}, 1.0f, {dy, n}, {x, k}, beta_w, dW, k, 0,
           "fc weight gradient");
      if (dB != nullptr) {
        const float one = 1, zero = 0;
        check_cublas(cublasSgemv(m.cublas(), CUBLAS_OP_N, to_int(n), to_int(rows), &one, dy,
                                 to_int(n), m.ones(), 1, &zero, dB, 1),
                     "cublasSgemv (fc bias gradient)");
      }
      // dX [rows, k] = dY W.
      if (dx != nullptr)
        gemm(m, {false, false, rows, k, n}, 1.0f, {dy, n}, {W, k}, beta, dx, k, 0,
             "fc input gradient");
    });
  };
}

BackwardBuilder lower_fc(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_fc_attrs>(node, DLHOST_FC_ATTRS_STRUCT_SIZE_1_0);
  int32_t batch_dims = DLHOST_HAS_FIELD(&a, dlhost_fc_attrs, batch_dims) ? a.batch_dims : 1;
  if (batch_dims == 0) batch_dims = 1;
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (batch_dims < 1 || batch_dims >= static_cast<int32_t>(in.dims.size()))
    node_unimplemented(node, "fc batch_dims " + std::to_string(batch_dims));
  int64_t rows = 1;
  for (int32_t d = 0; d < batch_dims; ++d) rows *= in.dims[d];
  const int64_t k = in.count / rows, n = a.out_features;
  if (node.num_params != (a.has_bias ? 2 : 1) || m.param(node.params[0]).count != n * k ||
      out.count != rows * n)
    node_invalid(node, "fc shapes do not agree");
  return fc_layer(m, in, out, rows, k, n, m.param(node.params[0]),
                  a.has_bias ? &m.param(node.params[1]) : nullptr);
}

BackwardBuilder lower_add(Model& m, const dlhost_node& node) {
  expect_inputs(node, 2);
  Tensor &a = m.tensor(node.inputs[0]), &b = m.tensor(node.inputs[1]), &out = m.tensor(node.output);
  if (a.count != out.count || b.count != out.count) node_invalid(node, "add wants one shape");
  const int n = to_int(out.count);
  m.add_forward([&m, n, A = a.value, B = b.value, y = out.value] {
    const float one = 1;
    check_cublas(
        cublasSgeam(m.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, 1, &one, A, n, &one, B, n, y, n),
        "cublasSgeam (add)");
  });
  return [&m, n, &a, &b, &out] {
    for (Tensor* t : {&a, &b}) {
      if (t->grad == nullptr) continue;
      const bool overwrite = m.beta_for(*t) == 0.0f;
      m.add_backward([&m, n, overwrite, dx = t->grad, dy = out.grad] {
        const float one = 1;
        if (overwrite)
          check_cuda(cudaMemcpyAsync(dx, dy, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToDevice,
                                     m.stream()),
                     "add backward");
        else
          check_cublas(cublasSaxpy(m.cublas(), n, &one, dy, 1, dx, 1), "cublasSaxpy (add)");
      });
    }
  };
}

BackwardBuilder lower_dropout(Model& m, const dlhost_node& node, uint32_t index) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_dropout_attrs>(node, DLHOST_DROPOUT_ATTRS_STRUCT_SIZE);
  if (!(a.probability >= 0.0f && a.probability < 1.0f))
    node_invalid(node, "dropout probability outside [0, 1)");
  Tensor &in = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  float* mask = m.memory().alloc_n<float>(in.count, out.name + " mask");
  m.add_forward([&m, index, mask, p = a.probability, n = in.count, x = in.value, y = out.value] {
    dropout_forward(n, m.seed(), index, m.forward_calls(), p, x, y, mask, m.stream());
  });
  return unary_backward(m, in, out,
                        [&m, mask, n = in.count](float beta, auto, auto dx, auto, auto dy) {
                          scale_backward(n, mask, dy, dx, beta, m.stream());
                        });
}

BackwardBuilder lower_softmax_cross_entropy(Model& m, const dlhost_node& node) {
  expect_inputs(node, 2);
  Tensor &in = m.tensor(node.inputs[0]), &labels = m.tensor(node.inputs[1]);
  Tensor& loss = m.tensor(node.output);
  if (in.dims.size() < 2) node_invalid(node, "logits need a class dimension");
  const int64_t classes = in.dims.back(), positions = in.count / classes;
  if (labels.ids == nullptr || labels.count != positions)
    node_invalid(node, "one I32 input label per position expected");
  labels.id_limit = classes;
  auto desc = std::make_shared<TensorDesc>();
  set_nchw(*desc, positions, classes, 1, 1);
  float* logp = m.memory().alloc_n<float>(in.count, in.name + " log-softmax");
  m.add_forward(
      [&m, desc, positions, classes, logp, x = in.value, ids = labels.ids, L = loss.value] {
        const float one = 1, zero = 0;
        check_cudnn(cudnnSoftmaxForward(m.cudnn(), CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE,
                                        &one, *desc, x, &zero, *desc, logp),
                    "cudnnSoftmaxForward");
        xent_loss(positions, classes, logp, ids, m.partials(), L, m.stream());
      });
  return [&m, positions, classes, logp, &in, &labels, &loss] {
    if (in.grad == nullptr) return;
    const float beta = m.beta_for(in);
    m.add_backward(
        [&m, positions, classes, logp, beta, ids = labels.ids, dL = loss.grad, dx = in.grad] {
          xent_backward(positions, classes, logp, ids, dL, dx, beta, m.stream());
        });
  };
}

BackwardBuilder lower_mse_loss(Model& m, const dlhost_node& node) {
  expect_inputs(node, 2);
  Tensor &x = m.tensor(node.inputs[0]), &t = m.tensor(node.inputs[1]),
         &loss = m.tensor(node.output);
  if (x.count != t.count || x.value == nullptr || t.value == nullptr)
    node_invalid(node, "prediction and target must be F32 of one size");
  m.add_forward([&m, n = x.count, X = x.value, T = t.value, L = loss.value] {
    sum_squares(n, X, T, m.partials(), m.stream());
    finish_sum(m.partials(), 1.0 / static_cast<double>(n), L, m.stream());
  });
  return [&m, &x, &t, &loss] {
    const float beta_x = x.grad != nullptr ? m.beta_for(x) : 0.0f;
    const float beta_t = t.grad != nullptr ? m.beta_for(t) : 0.0f;
    m.add_backward(
        [&m, beta_x, beta_t, n = x.count, X = x.value, T = t.value, dL = loss.grad, dX = x.grad,
         dT = t.grad] { mse_backward(n, X, T, dL, dX, beta_x, dT, beta_t, m.stream()); });
  };
}

BackwardBuilder lower_embedding(Model& m, const dlhost_node& node) {
  expect_inputs(node, 1);
  const auto& a = attrs_of<dlhost_embedding_attrs>(node, DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE);
  Tensor &ids = m.tensor(node.inputs[0]), &out = m.tensor(node.output);
  if (ids.ids == nullptr || node.num_params != 1 ||
      m.param(node.params[0]).count != a.vocab * a.dim || out.count != ids.count * a.dim)
    node_invalid(node, "embedding shapes do not agree");
  ids.id_limit = a.vocab;
  Param& table = m.param(node.params[0]);
  m.add_forward([&m, rows = ids.count, dim = a.dim, I = ids.ids, E = table.value, y = out.value] {
    embedding_forward(rows, dim, I, E, y, m.stream());
  });
  return [&m, rows = ids.count, dim = a.dim, I = ids.ids, &table, &out] {
    // A tied output layer (tied_fc) ran its backward first and wrote its share: add to it.
    const bool overwrite = !table.grad_written;
    table.grad_written = true;
    m.add_backward(
        [&m, rows, dim, I, overwrite, dE = table.grad, count = table.count, dy = out.grad] {
          if (overwrite)
            check_cuda(cudaMemsetAsync(dE, 0, static_cast<size_t>(count) * 4, m.stream()),
                       "embedding backward");
          embedding_backward(rows, dim, I, dy, dE, m.stream());
        });
  };
}

}  // namespace dlhost::gpu_cudnn
