// optimizer.cpp — see optimizer.h. torch::optim::SGD computes, per parameter,
//   d = grad + weight_decay * w;  v = momentum * v + d (v = d at the first step);  w -= lr * v
// which is the ABI's SGD (dlhost_backend.h) with dampening 0 and no Nesterov. torch::optim::AdamW
// computes w *= 1 - lr * weight_decay, then the moments and w -= lr / (1 - beta1^t) * m /
// (sqrt(v) / sqrt(1 - beta2^t) + eps): the ABI's AdamW, amsgrad off. Clipping is the ABI's
// exactly: scale = clip_norm / norm when norm > clip_norm (clip_grad_norm_ would add 1e-6 to the
// norm), the norm summed in double over every gradient.
#include "optimizer.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>

namespace dlhost::cpu_libtorch {

struct Optimizer::Impl {
  std::vector<at::Tensor> params;
  float clip_norm;
  bool adamw;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  Impl(const std::vector<at::Tensor>& p, const dlhost_optimizer_desc& d)
      : params(p), clip_norm(d.clip_norm), adamw(d.kind == DLHOST_OPTIMIZER_ADAMW) {
    if (adamw) {
      optimizer =
          std::make_unique<torch::optim::AdamW>(p, torch::optim::AdamWOptions(d.learning_rate)
                                                       .betas({d.beta1, d.beta2})
                                                       .eps(d.epsilon)
                                                       .weight_decay(d.weight_decay));
    } else {
      optimizer = std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(d.learning_rate)
                                                             .momentum(d.momentum)
                                                             .weight_decay(d.weight_decay));
    }
  }
};

Optimizer::Optimizer(const std::vector<at::Tensor>& params, const dlhost_optimizer_desc& desc)
    : impl_(std::make_unique<Impl>(params, desc)) {}

Optimizer::~Optimizer() = default;

void Optimizer::step() {
  if (impl_->clip_norm > 0.0f) {
    at::NoGradGuard no_grad;
    double sum = 0;
    for (const at::Tensor& p : impl_->params) {
      const double n = p.grad().norm().item<double>();
      sum += n * n;
    }
    const double norm = std::sqrt(sum);
    if (norm > impl_->clip_norm)
      for (const at::Tensor& p : impl_->params) p.grad().mul_(impl_->clip_norm / norm);
  }
  impl_->optimizer->step();
}

uint64_t Optimizer::state_bytes() const {
  uint64_t bytes = 0;
  for (const auto& entry : impl_->optimizer->state()) {
    if (impl_->adamw) {
      const auto& state = static_cast<const torch::optim::AdamWParamState&>(*entry.second);
      if (state.exp_avg().defined()) bytes += state.exp_avg().nbytes();
      if (state.exp_avg_sq().defined()) bytes += state.exp_avg_sq().nbytes();
    } else {
      const auto& state = static_cast<const torch::optim::SGDParamState&>(*entry.second);
      if (state.momentum_buffer().defined()) bytes += state.momentum_buffer().nbytes();
    }
  }
  return bytes;
}

const char* Optimizer::name() const {
  return impl_->adamw ? "torch::optim::AdamW" : "torch::optim::SGD";
}

}  // namespace dlhost::cpu_libtorch
