// optimizer.cpp — see optimizer.h. The clip scale is min(1, clip_norm / ||g||), the norm over
// every gradient (TensorFlow's clip_by_global_norm has the same rule), applied before the weight
// decay is added: v = momentum * v + (scale * g + weight_decay * w); w -= lr * v. AdamW takes the
// same clipped gradient (its decay is decoupled: see add_adamw).
#include "optimizer.h"

#include <numeric>
#include <string>
#include <vector>

using dlhost::cpu_tensorflow::tf::Op;

namespace dlhost::cpu_tensorflow {

namespace {

// AdamW: TensorFlow's own ResourceApplyAdam (in place, the moments as resource variables) after
// the decoupled decay w -= lr * weight_decay * w (an AssignSubVariableOp), which is how Keras's
// AdamW applies it. ResourceApplyAdam computes
//   lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t);  var -= lr_t m / (sqrt(v) + epsilon)
// (the "epsilon hat" form of Kingma & Ba's paper), so it is fed epsilon sqrt(1 - beta2^t) to
// give the ABI's m_hat / (sqrt(v_hat) + epsilon). beta1^t, beta2^t and that epsilon are
// placeholders the model feeds per update from its update count.
void add_adamw(TF_Graph* g, Lowered& lowered, const dlhost_optimizer_desc& opt,
               const std::vector<TF_Output>& grads, Update& u) {
  const auto scalar_feed = [&](const char* name) {
    return Op(g, "Placeholder", name).attr("dtype", TF_FLOAT).shape("shape", {}).out();
  };
  u.beta1_power = scalar_feed("adamw/beta1_power");
  u.beta2_power = scalar_feed("adamw/beta2_power");
  u.epsilon_hat = scalar_feed("adamw/epsilon_hat");
  TF_Output lr = scalar_const(g, "adamw/learning_rate", opt.learning_rate);
  TF_Output beta1 = scalar_const(g, "adamw/beta1", opt.beta1);
  TF_Output beta2 = scalar_const(g, "adamw/beta2", opt.beta2);
  TF_Output decay = scalar_const(g, "adamw/decay", opt.learning_rate * opt.weight_decay);
  Op step(g, "NoOp", "adamw/step");
  for (size_t k = 0; k < lowered.params.size(); ++k) {
    const Variable& v = lowered.params[k];
    Op apply(g, "ResourceApplyAdam", v.name + "/apply");
    if (opt.weight_decay > 0) {
      // After the gradient: in a fused step the forward's read of w must come first.
      TF_Output w = Op(g, "ReadVariableOp", v.name + "/read_for_decay")
                        .in({v.handle, 0})
                        .attr("dtype", TF_FLOAT)
                        .after(grads[k].oper)
                        .out();
      apply.after(Op(g, "AssignSubVariableOp", v.name + "/decay")
                      .in({v.handle, 0})
                      .in(Op(g, "Mul", v.name + "/decay_amount").in(w).in(decay).out())
                      .attr("dtype", TF_FLOAT)
                      .finish());
    }
    TF_Operation* m = make_variable(g, v.name + "/adam_m", v.dims, 0.0f, lowered.initializers);
    TF_Operation* second = make_variable(g, v.name + "/adam_v", v.dims, 0.0f, lowered.initializers);
    u.state_bytes += 2 * uint64_t(v.count) * sizeof(float);
    step.after(apply.in({v.handle, 0})
                   .in({m, 0})
                   .in({second, 0})
                   .in(u.beta1_power)
                   .in(u.beta2_power)
                   .in(lr)
                   .in(beta1)
                   .in(beta2)
                   .in(u.epsilon_hat)
                   .in(grads[k])
                   .attr("T", TF_FLOAT)
                   .attr("use_locking", false)
                   .attr("use_nesterov", false)
                   .finish());
  }
  u.step = step.finish();
}

}  // namespace

Update add_update(TF_Graph* g, Lowered& lowered, const dlhost_optimizer_desc& opt, bool fused) {
  Update u;
  const std::vector<Variable>& params = lowered.params;
  for (const Variable& v : params)
    if (!fused)
      u.grads.push_back(Op(g, "Placeholder", v.name + "/grad")
                            .attr("dtype", TF_FLOAT)
                            .shape("shape", v.dims)
                            .out());
  std::vector<TF_Output> grads = fused ? lowered.grads : u.grads;
  if (opt.clip_norm > 0) {
    std::vector<TF_Output> squares;
    for (size_t k = 0; k < params.size(); ++k) {
      std::vector<int32_t> axes(params[k].dims.size());
      std::iota(axes.begin(), axes.end(), 0);
      const std::string name = params[k].name + "/grad_square_sum";
      squares.push_back(Op(g, "Sum", name)
                            .in(Op(g, "Square", params[k].name + "/grad_square").in(grads[k]).out())
                            .in(ints_const(g, name + "/axes", axes))
                            .out());
    }
    TF_Output norm = Op(g, "Sqrt", "clip/global_norm")
                         .in(Op(g, "AddN", "clip/square_sum").ins(squares).out())
                         .out();
    TF_Output scale = Op(g, "Minimum", "clip/scale")
                          .in(scalar_const(g, "clip/one", 1.0f))
                          .in(Op(g, "RealDiv", "clip/ratio")
                                  .in(scalar_const(g, "clip/norm", opt.clip_norm))
                                  .in(norm)
                                  .out())
                          .out();
    for (size_t k = 0; k < params.size(); ++k)
      grads[k] = Op(g, "Mul", params[k].name + "/grad_clipped").in(grads[k]).in(scale).out();
  }
  if (opt.kind == DLHOST_OPTIMIZER_ADAMW) {
    add_adamw(g, lowered, opt, grads, u);
    return u;
  }
  TF_Output lr = scalar_const(g, "sgd/learning_rate", opt.learning_rate);
  TF_Output momentum = scalar_const(g, "sgd/momentum", opt.momentum);
  TF_Output decay = scalar_const(g, "sgd/weight_decay", opt.weight_decay);
  Op step(g, "NoOp", "sgd/step");
  for (size_t k = 0; k < params.size(); ++k) {
    const Variable& v = params[k];
    TF_Output grad = grads[k];
    if (opt.weight_decay > 0) {
      TF_Output w = Op(g, "ReadVariableOp", v.name + "/read_for_decay")
                        .in({v.handle, 0})
                        .attr("dtype", TF_FLOAT)
                        .out();
      grad = Op(g, "AddV2", v.name + "/grad_decayed")
                 .in(grad)
                 .in(Op(g, "Mul", v.name + "/decay").in(w).in(decay).out())
                 .out();
    }
    TF_Operation* apply;
    if (opt.momentum > 0) {
      TF_Operation* accum =
          make_variable(g, v.name + "/momentum", v.dims, 0.0f, lowered.initializers);
      u.state_bytes += uint64_t(v.count) * sizeof(float);
      apply = Op(g, "ResourceApplyMomentum", v.name + "/apply")
                  .in({v.handle, 0})
                  .in({accum, 0})
                  .in(lr)
                  .in(grad)
                  .in(momentum)
                  .attr("T", TF_FLOAT)
                  .attr("use_nesterov", false)
                  .finish();
    } else {
      apply = Op(g, "ResourceApplyGradientDescent", v.name + "/apply")
                  .in({v.handle, 0})
                  .in(lr)
                  .in(grad)
                  .attr("T", TF_FLOAT)
                  .finish();
    }
    step.after(apply);
  }
  u.step = step.finish();
  return u;
}

}  // namespace dlhost::cpu_tensorflow
