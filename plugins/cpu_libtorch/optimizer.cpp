// optimizer.cpp — see optimizer.h. torch::optim::SGD computes, per parameter,
//   d = grad + weight_decay * w;  v = momentum * v + d (v = d at the first step);  w -= lr * v
// which is the ABI's SGD (dlhost_backend.h) with dampening 0 and no Nesterov. Clipping is the
// ABI's exactly: scale = clip_norm / norm when norm > clip_norm (clip_grad_norm_ would add 1e-6
// to the norm), the norm summed in double over every gradient.
#include "optimizer.h"

#include <torch/optim/sgd.h>

#include <cmath>

namespace dlhost::cpu_libtorch {

struct Sgd::Impl {
  std::vector<at::Tensor> params;
  float clip_norm;
  torch::optim::SGD sgd;
  Impl(const std::vector<at::Tensor>& p, const dlhost_optimizer_desc& d)
      : params(p),
        clip_norm(d.clip_norm),
        sgd(p, torch::optim::SGDOptions(d.learning_rate)
                   .momentum(d.momentum)
                   .weight_decay(d.weight_decay)) {}
};

Sgd::Sgd(const std::vector<at::Tensor>& params, const dlhost_optimizer_desc& desc)
    : impl_(std::make_unique<Impl>(params, desc)) {}

Sgd::~Sgd() = default;

void Sgd::step() {
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
  impl_->sgd.step();
}

uint64_t Sgd::state_bytes() const {
  uint64_t bytes = 0;
  for (const auto& entry : impl_->sgd.state()) {
    const auto& state = static_cast<const torch::optim::SGDParamState&>(*entry.second);
    if (state.momentum_buffer().defined()) bytes += state.momentum_buffer().nbytes();
  }
  return bytes;
}

}  // namespace dlhost::cpu_libtorch
