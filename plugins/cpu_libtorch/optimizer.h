// optimizer.h — the update of cpu_libtorch: the network's SGD (learning rate, momentum, weight
// decay) as torch::optim::SGD, or AdamW (ABI 1.4) as torch::optim::AdamW, after the ABI's
// clipping by the global gradient norm. Its own translation unit (optimizer.cpp) because
// torch/optim pulls in most of the C++ frontend's headers, which nothing else here needs.
// Thread-safety: one caller at a time, as the model that owns it.
#ifndef DLHOST_CPU_LIBTORCH_OPTIMIZER_H
#define DLHOST_CPU_LIBTORCH_OPTIMIZER_H

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "dlhost/dlhost_backend.h"

namespace dlhost::cpu_libtorch {

class Optimizer {
 public:
  // `params` are the model's leaves, whose grad() buffers the host may have averaged in place.
  // `desc.kind` is SGD or ADAMW (compile_model refuses the rest).
  Optimizer(const std::vector<at::Tensor>& params, const dlhost_optimizer_desc& desc);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Scales the gradients (in place, as torch.nn.utils.clip_grad_norm_ does) so that their global
  // L2 norm is at most clip_norm, when clipping is on; then one step of torch's optimizer.
  void step();
  // Bytes of the optimizer's state (momentum buffers; AdamW's two moments), made at its first
  // step.
  uint64_t state_bytes() const;
  // "torch::optim::SGD" or "torch::optim::AdamW".
  const char* name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlhost::cpu_libtorch

#endif  // DLHOST_CPU_LIBTORCH_OPTIMIZER_H
