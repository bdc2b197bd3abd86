// optimizer.cpp — see optimizer.h. MXNet's sgd_mom_update computes, per element,
//   mom = momentum * mom - lr * (rescale_grad * grad + wd * weight);  weight += mom
// which, with mom = -lr * v and a constant lr, is the ABI's v = momentum * v + (g + wd * w);
// w -= lr * v, g being the clipped gradient (rescale_grad = clip_norm / norm when the global L2
// norm exceeds clip_norm, else 1). The norm: MXNet's multi_sum_sq over every gradient, the sums
// added in double on the host (the clipping decision needs the value there, as Gluon's
// clip_global_norm reads it).
#include "optimizer.h"

#include <cmath>
#include <string>

namespace dlhost::cpu_mxnet {

Optimizer::Optimizer(Program& program, const dlhost_optimizer_desc& desc)
    : program_(program), desc_(desc) {
  const bool adamw = desc.kind == DLHOST_OPTIMIZER_ADAMW;
  if (adamw) rescale_ = NDArray::zeros({1});
  for (size_t l = 0; l < program.leaves.size(); ++l) {
    Leaf& leaf = program.leaves[l];
    if (leaf.kind != LeafKind::kTrainable) continue;
    trainable_.push_back(int(l));
    uint64_t count = 1;
    for (uint32_t s : leaf.shape) count *= s;
    if (desc.momentum > 0 || adamw) {
      moment_.push_back(NDArray::zeros(leaf.shape));
      state_bytes_ += count * 4;
    }
    if (adamw) {
      second_.push_back(NDArray::zeros(leaf.shape));
      state_bytes_ += count * 4;
    }
    for (const auto& [begin, end] : leaf.frozen) {
      frozen_.push_back(leaf.grad.view(begin, end, {end - begin}));
      frozen_shape_.push_back({int64_t(end - begin)});
    }
  }
}

float Optimizer::clip_scale() const {
  if (desc_.clip_norm <= 0.0f || trainable_.empty()) return 1.0f;
  std::vector<NDArrayHandle> grads;
  for (int l : trainable_) grads.push_back(program_.leaves[size_t(l)].grad.get());
  std::vector<NDArray> sums =
      invoke("multi_sum_sq", grads, {{"num_arrays", std::to_string(grads.size())}});
  std::vector<float> host(grads.size());
  sums.at(0).copy_to(host.data(), host.size());
  double total = 0;
  for (float s : host) total += s;
  const double norm = std::sqrt(total);
  return norm > desc_.clip_norm ? float(desc_.clip_norm / norm) : 1.0f;
}

// _adamw_update computes m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
//   w -= eta (lr m / (sqrt(v) + epsilon) + wd w),   g = rescale_grad * grad
// (and skips the update when rescale_grad is 0, NaN or inf). With eta = 1,
// lr = lr_abi sqrt(1 - beta2^t) / (1 - beta1^t), epsilon = epsilon_abi sqrt(1 - beta2^t) and
// wd = lr_abi * weight_decay that is the ABI's m_hat / (sqrt(v_hat) + epsilon) step after the
// decoupled decay (the decay reads the same w_{t-1}), which is how mxnet.optimizer.AdamW folds
// the bias correction into the learning rate.
void Optimizer::adamw_step(float scale) {
  const double t = double(++updates_);
  const double c1 = 1.0 - std::pow(double(desc_.beta1), t);
  const double root_c2 = std::sqrt(1.0 - std::pow(double(desc_.beta2), t));
  rescale_.copy_from(&scale, 1);
  const Attrs attrs{{"lr", number(double(desc_.learning_rate) * root_c2 / c1)},
                    {"beta1", number(desc_.beta1)},
                    {"beta2", number(desc_.beta2)},
                    {"epsilon", number(double(desc_.epsilon) * root_c2)},
                    {"wd", number(double(desc_.learning_rate) * double(desc_.weight_decay))},
                    {"eta", "1"}};
  for (size_t k = 0; k < trainable_.size(); ++k) {
    const Leaf& leaf = program_.leaves[size_t(trainable_[k])];
    invoke("_adamw_update",
           {leaf.value.get(), leaf.grad.get(), moment_[k].get(), second_[k].get(), rescale_.get()},
           attrs, {leaf.value.get()});
  }
}

void Optimizer::step() {
  for (size_t k = 0; k < frozen_.size(); ++k)
    invoke("_zeros", {}, {{"shape", tuple(frozen_shape_[k])}}, {frozen_[k].get()});
  if (desc_.kind == DLHOST_OPTIMIZER_ADAMW) return adamw_step(clip_scale());
  const Attrs common{{"lr", number(desc_.learning_rate)},
                     {"wd", number(desc_.weight_decay)},
                     {"rescale_grad", number(clip_scale())}};
  Attrs with_momentum = common;
  with_momentum.push_back({"momentum", number(desc_.momentum)});
  for (size_t k = 0; k < trainable_.size(); ++k) {
    const Leaf& leaf = program_.leaves[size_t(trainable_[k])];
    if (moment_.empty())
      invoke("sgd_update", {leaf.value.get(), leaf.grad.get()}, common, {leaf.value.get()});
    else
      invoke("sgd_mom_update", {leaf.value.get(), leaf.grad.get(), moment_[k].get()}, with_momentum,
             {leaf.value.get()});
  }
}

uint64_t Optimizer::state_bytes() const { return state_bytes_; }

}  // namespace dlhost::cpu_mxnet
