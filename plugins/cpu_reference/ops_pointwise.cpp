// ops_pointwise.cpp — the ops that treat elements (or rows) one at a time: activations, add,
// dropout, embedding lookup, the two losses, and the SGD step.
#include <algorithm>
#include <cmath>
#include <string>

#include "dlhost/common.hpp"
#include "ops.h"

namespace cpu_reference {

// --- activations -----------------------------------------------------------------------------
// relu:    y = max(0, x),        dx += dy * [x > 0]
// sigmoid: y = 1 / (1 + e^-x),   dx += dy * y * (1 - y)
// tanh:    y = tanh(x),          dx += dy * (1 - y^2)

void activation_forward(Activation kind, int64_t n, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    switch (kind) {
      case Activation::kRelu:
        y[i] = v > 0 ? x[i] : 0.0f;
        break;
      case Activation::kSigmoid:
        y[i] = static_cast<float>(1.0 / (1.0 + std::exp(-v)));
        break;
      case Activation::kTanh:
        y[i] = static_cast<float>(std::tanh(v));
        break;
    }
  }
}

void activation_backward(Activation kind, int64_t n, const float* x, const float* y,
                         const float* dy, float* dx) {
  if (dx == nullptr) return;
  for (int64_t i = 0; i < n; ++i) {
    const double out = y[i];
    double local = 0;  // dy/dx at this element
    switch (kind) {
      case Activation::kRelu:
        local = x[i] > 0 ? 1.0 : 0.0;
        break;
      case Activation::kSigmoid:
        local = out * (1.0 - out);
        break;
      case Activation::kTanh:
        local = 1.0 - out * out;
        break;
    }
    dx[i] += static_cast<float>(dy[i] * local);
  }
}

// --- add -------------------------------------------------------------------------------------
// y = a + b;  da += dy, db += dy (both, even when a and b are one tensor).

void add_forward(int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void add_backward(int64_t n, const float* dy, float* da, float* db) {
  for (int64_t i = 0; i < n; ++i) {
    if (da != nullptr) da[i] += dy[i];
    if (db != nullptr) db[i] += dy[i];
  }
}

// --- dropout (inverted) ----------------------------------------------------------------------
// mask_i = keep(seed, node, step, i, p) / (1 - p), i the row-major index over the whole tensor;
// y = x * mask,  dx += dy * mask.

void dropout_forward(uint64_t seed, uint32_t node, uint64_t step, float probability, int64_t n,
                     const float* x, float* y, float* mask) {
  const float kept_scale = 1.0f / (1.0f - probability);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep =
        dlhost_dropout_keep(seed, node, step, static_cast<uint64_t>(i), probability) != 0;
    mask[i] = keep ? kept_scale : 0.0f;
    y[i] = x[i] * mask[i];
  }
}

void dropout_backward(int64_t n, const float* mask, const float* dy, float* dx) {
  if (dx == nullptr) return;
  for (int64_t i = 0; i < n; ++i) dx[i] += dy[i] * mask[i];
}

// --- embedding -------------------------------------------------------------------------------
// y[r, :] = table[id_r, :];  dtable[v, :] = sum over rows r with id_r = v of dy[r, :]
// (a scatter-add: repeated ids accumulate).

namespace {
void check_id(int32_t id, int64_t vocab, int64_t row) {
  if (id < 0 || id >= vocab)
    dlhost::sdk::invalid("cpu_reference: embedding id " + std::to_string(id) + " at position " +
                         std::to_string(row) + " is outside [0, " + std::to_string(vocab) + ")");
}
}  // namespace

void embedding_forward(int64_t rows, int64_t vocab, int64_t dim, const int32_t* ids,
                       const float* table, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    check_id(ids[r], vocab, r);
    std::copy(table + ids[r] * dim, table + (ids[r] + 1) * dim, y + r * dim);
  }
}

void embedding_backward(int64_t rows, int64_t vocab, int64_t dim, const int32_t* ids,
                        const float* dy, float* dtable) {
  std::fill(dtable, dtable + vocab * dim, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    check_id(ids[r], vocab, r);
    for (int64_t d = 0; d < dim; ++d) dtable[ids[r] * dim + d] += dy[r * dim + d];
  }
}

// --- softmax cross-entropy -------------------------------------------------------------------
// Over P positions with C classes, computed through the log-sum-exp so no exp overflows:
//   lse_p = m_p + log sum_c exp(x[p, c] - m_p),  m_p = max_c x[p, c]
//   loss = (1/P) sum_p (lse_p - x[p, label_p])
//   dx[p, c] += dloss / P * (exp(x[p, c] - lse_p) - [c == label_p])

namespace {
double log_sum_exp(int64_t classes, const float* row) {
  const double peak = *std::max_element(row, row + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(row[c] - peak);
  return peak + std::log(sum);
}

void check_label(int32_t label, int64_t classes, int64_t position) {
  if (label < 0 || label >= classes)
    dlhost::sdk::invalid("cpu_reference: label " + std::to_string(label) + " at position " +
                         std::to_string(position) + " is outside [0, " + std::to_string(classes) +
                         ")");
}
}  // namespace

float softmax_cross_entropy_forward(int64_t positions, int64_t classes, const float* logits,
                                    const int32_t* labels) {
  double total = 0;
  for (int64_t p = 0; p < positions; ++p) {
    check_label(labels[p], classes, p);
    const float* row = logits + p * classes;
    total += log_sum_exp(classes, row) - row[labels[p]];
  }
  return static_cast<float>(total / static_cast<double>(positions));
}

void softmax_cross_entropy_backward(int64_t positions, int64_t classes, const float* logits,
                                    const int32_t* labels, float dloss, float* dlogits) {
  if (dlogits == nullptr) return;
  const double per_position = static_cast<double>(dloss) / static_cast<double>(positions);
  for (int64_t p = 0; p < positions; ++p) {
    check_label(labels[p], classes, p);
    const float* row = logits + p * classes;
    const double lse = log_sum_exp(classes, row);
    for (int64_t c = 0; c < classes; ++c) {
      const double softmax = std::exp(row[c] - lse);
      const double target = c == labels[p] ? 1.0 : 0.0;
      dlogits[p * classes + c] += static_cast<float>(per_position * (softmax - target));
    }
  }
}

// --- mean squared error ----------------------------------------------------------------------
// loss = (1/n) sum (x - t)^2;  dx += dloss * 2 (x - t) / n;  dt -= the same (when t is computed).

float mse_forward(int64_t n, const float* x, const float* target) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - target[i];
    total += d * d;
  }
  return static_cast<float>(total / static_cast<double>(n));
}

void mse_backward(int64_t n, const float* x, const float* target, float dloss, float* dx,
                  float* dtarget) {
  const double factor = 2.0 * dloss / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    const double g = factor * (static_cast<double>(x[i]) - target[i]);
    if (dx != nullptr) dx[i] += static_cast<float>(g);
    if (dtarget != nullptr) dtarget[i] -= static_cast<float>(g);
  }
}

// --- SGD -------------------------------------------------------------------------------------

double sum_of_squares(int64_t n, const float* g) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
  return sum;
}

void sgd_update(int64_t n, float learning_rate, float momentum, float weight_decay,
                float grad_scale, const float* grad, float* value, float* velocity) {
  for (int64_t i = 0; i < n; ++i) {
    float step = grad_scale * grad[i] + weight_decay * value[i];
    if (velocity != nullptr) {
      velocity[i] = momentum * velocity[i] + step;
      step = velocity[i];
    }
    value[i] -= learning_rate * step;
  }
}

}  // namespace cpu_reference
