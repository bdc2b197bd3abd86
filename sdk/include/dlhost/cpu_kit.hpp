// cpu_kit.hpp — the update a CPU backend on host memory writes again otherwise: SGD with global
// norm clipping, weight decay and momentum, in the order dlhost_backend.h documents beside
// dlhost_optimizer_desc (the order cpu_reference uses, which `dlhost conform` compares against).
//
//   double sum = 0;
//   for (auto& p : params) sum += sdk::sum_of_squares(p.grad.data(), p.grad.size());
//   const double scale = sdk::clip_scale(sum, opt.clip_norm);
//   for (auto& p : params) sdk::sgd_step(opt, scale, p.grad.data(), p.value.data(),
//                                        p.velocity.empty() ? nullptr : p.velocity.data(), n);
//
// Header-only, compiled into the plugin; nothing crosses the ABI. Pure functions; thread-safe.
#ifndef DLHOST_CPU_KIT_HPP
#define DLHOST_CPU_KIT_HPP

#include <cmath>
#include <cstddef>

#include "dlhost/dlhost.h"

namespace dlhost::sdk {

// The sum of squares of one gradient, in double (the global norm adds every parameter's).
inline double sum_of_squares(const float* grad, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(grad[i]) * grad[i];
  return s;
}

// Step 1, clipping: min(1, clip_norm / ||g||) over every parameter's raw gradient (weight decay
// not included); 1 when clip_norm is 0 (off).
inline double clip_scale(double sum_of_squares_all, float clip_norm) {
  if (clip_norm <= 0.0f) return 1.0;
  const double norm = std::sqrt(sum_of_squares_all);
  return norm > clip_norm ? clip_norm / norm : 1.0;
}

// Steps 2-4 for one parameter of `n` elements: step = scale g + weight_decay w; with momentum
// (velocity not NULL) v = momentum v + step, step = v; w -= learning_rate step.
inline void sgd_step(const dlhost_optimizer_desc& opt, double scale, const float* grad,
                     float* value, float* velocity, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float step = float(scale) * grad[i] + opt.weight_decay * value[i];
    if (velocity != nullptr) step = velocity[i] = opt.momentum * velocity[i] + step;
    value[i] -= opt.learning_rate * step;
  }
}

}  // namespace dlhost::sdk

#endif  // DLHOST_CPU_KIT_HPP
