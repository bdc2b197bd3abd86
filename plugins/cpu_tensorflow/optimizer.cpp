// optimizer.cpp — see optimizer.h. The clip scale is min(1, clip_norm / ||g||), the norm over
// every gradient (TensorFlow's clip_by_global_norm has the same rule), applied before the weight
// decay is added: v = momentum * v + (scale * g + weight_decay * w); w -= lr * v.
#include "optimizer.h"

#include <numeric>
#include <string>

using dlhost::cpu_tensorflow::tf::Op;

namespace dlhost::cpu_tensorflow {

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
