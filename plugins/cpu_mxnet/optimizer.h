// optimizer.h — the update of cpu_mxnet with MXNet's own optimizer operators, in place on the
// trainable arrays (outputs = the weights, as mxnet.optimizer.SGD calls them): sgd_mom_update
// (sgd_update without momentum) with the ABI's learning rate, momentum and weight decay, and the
// ABI's clipping by the global gradient norm passed as their rescale_grad. MXNet's own
// clip_gradient is element-wise, not the ABI's, and is left off. AdamW (ABI 1.4): MXNet's own
// _adamw_update (src/operator/contrib/adamw.cc, what mxnet.optimizer.AdamW calls), decoupled
// weight decay included; the bias correction folded into its lr and epsilon (optimizer.cpp).
// Thread-safety: one caller at a time, as the model that owns it.
#ifndef DLHOST_CPU_MXNET_OPTIMIZER_H
#define DLHOST_CPU_MXNET_OPTIMIZER_H

#include <vector>

#include "dlhost/dlhost_backend.h"
#include "program.h"

namespace dlhost::cpu_mxnet {

class Optimizer {
 public:
  // `program`'s trainable leaves, whose gradient arrays the host may have averaged in place.
  Optimizer(Program& program, const dlhost_optimizer_desc& desc);
  // Zeroes the frozen gradient ranges (an LSTM's second bias), computes the clipping scale when
  // clipping is on, then one update of every trainable array.
  void step();
  uint64_t state_bytes() const;

 private:
  float clip_scale() const;
  void adamw_step(float scale);

  Program& program_;
  dlhost_optimizer_desc desc_;
  std::vector<int> trainable_;   // leaf ids
  std::vector<NDArray> moment_;  // by trainable_: SGD's momentum (when > 0), AdamW's first moment
  std::vector<NDArray> second_;  // by trainable_: AdamW's second moment
  NDArray rescale_;              // AdamW: [1], the clipping scale (_adamw_update's input)
  uint64_t updates_ = 0;         // AdamW's t so far
  std::vector<NDArray> frozen_;  // views of the gradient ranges that stay zero
  std::vector<std::vector<int64_t>> frozen_shape_;
  uint64_t state_bytes_ = 0;
};

}  // namespace dlhost::cpu_mxnet

#endif  // DLHOST_CPU_MXNET_OPTIMIZER_H
