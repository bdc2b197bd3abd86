// conform.cpp — `dlhost conform`: checks a backend plugin (any .so, a third party's included)
// numerically against a reference backend, the way oneDNN's benchdnn checks primitives.
//
// Reads top to bottom: options, choosing the two backends, a Session (one compiled model on one
// backend), the op problems (forward/gradients against the reference, then finite differences on
// each backend), the network problems (a few training steps on each), then the report: a table
// as problems end, a rerun line per failure, a summary line and --json. The numbers are judged in
// conform_check.h; the problems and their graphs live in conform_problems.h; docs/conform.md
// states what is checked and why. Runs on the calling thread; nothing is shared.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "conform/conform_check.h"
#include "conform/conform_problems.h"
#include "core/command.h"
#include "core/compatibility.h"
#include "core/environment.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/number_text.h"
#include "data/synthetic.h"
#include "dlhost/dlhost.hpp"
#include "dlhost/plugin_kit.hpp"
#include "output/output_file.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using conform::Comparison;
using conform::Descriptor;
using conform::Status;

constexpr const char* kDefaultReference = "cpu_reference";
// Networks above this many parameters are left out unless named (CI machines, naive references).
constexpr int64_t kDefaultMaxNetworkParams = 20'000'000;
// Weights sampled per parameter tensor for the finite-difference check: the one with the largest
// gradient, and one more drawn among those with at least a tenth of it.
constexpr int kFdSamplesPerParam = 2;
constexpr uint64_t kSeed = 42;

struct Settings {
  std::string backend, reference = kDefaultReference;
  std::vector<std::string> ops, networks, cases;
  int64_t steps = 3;
  std::string shapes = "small";
  int64_t threads = 0;
  std::string json_path;
  // The backend's precision mode (the reference always runs fp32); tolerances scale with its
  // epsilon (conform::precision_eps).
  std::string precision = "fp32";
  // --strict: exit 1 unless every op problem of an op the backend declares PASSED.
  bool strict = false;
  double eps() const { return conform::precision_eps(precision); }
};

// --- the two backends ----------------------------------------------------------------------------

struct Backend {
  std::string given;  // as on the command line: a name or a path
  const LoadedPlugin* plugin = nullptr;
};

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 3 && s.compare(s.size() - 3, 3, ".so") == 0);
}

// A name is looked up among the plugins found; a path is loaded on its own (a vendor's .so need
// not sit in a plugin folder). Returns an error line, empty when `out` is set.
std::string resolve_backend(const PluginRegistry& registry,
                            std::vector<std::unique_ptr<PluginRegistry>>& loaded,
                            const std::string& given, const char* role, Backend& out) {
  out.given = given;
  if (looks_like_path(given)) {
    // One registry per file: pointers into it stay valid, and the file is not refused as a
    // duplicate of a plugin of the same name found in the plugin folders.
    loaded.push_back(std::make_unique<PluginRegistry>());
    PluginRegistry& own = *loaded.back();
    if (!own.load_file(given))
      return std::string(role) + " " + given + " cannot be used: " +
             (own.refused().empty() ? "refused" : own.refused().back().reason);
    out.plugin = &own.plugins().back();
    own.probe(*out.plugin);
    if (out.plugin->kind != DLHOST_PLUGIN_BACKEND)
      return std::string(role) + " " + given + " is a " + kind_name(out.plugin->kind) +
             " plugin, not a backend";
  } else {
    out.plugin = registry.find(DLHOST_PLUGIN_BACKEND, given);
    if (out.plugin == nullptr) {
      std::string names;
      for (const auto& n : registry.names(DLHOST_PLUGIN_BACKEND))
        names += (names.empty() ? "" : ", ") + n;
      return std::string(role) + " '" + given +
             "' is not installed here (backends found: " + (names.empty() ? "none" : names) +
             "); give the path of its .so, or add its folder with --plugin-path";
    }
  }
  if (!out.plugin->usable)
    return std::string(role) + " '" + out.plugin->name +
           "' cannot run here: " + out.plugin->unusable_reason;
  if (out.plugin->table->backend->device_count() < 1)
    return std::string(role) + " '" + out.plugin->name + "' reports no device";
  return "";
}

// --- one compiled model on one backend -----------------------------------------------------------

class Session {
 public:
  Session(const LoadedPlugin& plugin, const Graph& graph, const dlhost_optimizer_desc& optimizer,
          const dlhost_options& options)
      : api_(plugin.table->backend),
        name_(plugin.name),
        graph_(graph),
        context_(create_context(plugin, 0, options)),
        model_(compile_model(plugin, context_.get(), graph.view(), optimizer, options)) {}

  void load(const std::vector<std::vector<float>>& weights, const std::vector<InputData>& inputs) {
    for (int32_t p = 0; p < graph_.num_params(); ++p) write_param(p, weights[p]);
    for (const auto& in : inputs)
      check_status(api_->set_input(model_.get(), in.tensor, in.bytes.data(), in.bytes.size()),
                   name_ + " set_input " + graph_.tensor(in.tensor).name);
  }
  void write_param(int32_t p, const std::vector<float>& v) {
    check_status(
        api_->write_param(model_.get(), p, DLHOST_PARAM_VALUE, v.data(), graph_.param_bytes(p)),
        name_ + " write_param " + graph_.param(p).name);
  }
  std::vector<float> read_param(int32_t p, dlhost_param_part part) {
    std::vector<float> v(static_cast<size_t>(graph_.param(p).count));
    check_status(api_->read_param(model_.get(), p, part, v.data(), graph_.param_bytes(p)),
                 name_ + " read_param " + graph_.param(p).name);
    return v;
  }
  void forward() { check_status(api_->forward(model_.get()), name_ + " forward"); }
  void backward() { check_status(api_->backward(model_.get(), nullptr), name_ + " backward"); }
  void update() { check_status(api_->update(model_.get()), name_ + " update"); }
  float loss() {
    float l = 0;
    check_status(api_->read_loss(model_.get(), &l), name_ + " read_loss");
    return l;
  }

 private:
  const dlhost_backend_api* api_;
  std::string name_;
  const Graph& graph_;
  // Declared in this order so the model goes before its context.
  ContextHandle context_;
  ModelHandle model_;
};

dlhost_options backend_options(const Settings& s, const std::string& precision) {
  dlhost_options o;
  o.values["threads"] = std::to_string(s.threads);
  o.values["seed"] = std::to_string(kSeed);  // dropout's mask: the same on both backends
  o.values["precision"] = precision;
  return o;
}
// The backend under test in the mode asked for; the reference is the fp32 answer.
dlhost_options backend_options(const Settings& s) { return backend_options(s, s.precision); }
dlhost_options reference_options(const Settings& s) { return backend_options(s, "fp32"); }

// --- one row of the report -----------------------------------------------------------------------

struct Row {
  std::string id;    // the canonical descriptor
  std::string kind;  // "op" or "network"
  Status status = Status::kPassed;
  std::string reason;
  // An op problem whose graph needs an op the backend does not declare (conform builds some
  // problems on a convolution, say): it cannot check the backend's op, so --strict leaves it out.
  bool needs_undeclared_op = false;
  double seconds = 0;
  std::vector<Comparison> checks;
  json extra = json::object();  // tolerances, finite-difference samples, loss sequences
  // Over the checks that were judged: a skipped one (a gradient that is zero on the reference, so
  // no relative error means anything) would otherwise show a figure above 1 on a PASSED row.
  double worst_ratio() const {
    double r = -1;
    for (const auto& c : checks)
      if (c.status != Status::kSkipped) r = std::max(r, c.ratio());
    return r;
  }
};

json comparison_json(const Comparison& c) {
  json j{{"name", c.name}, {"status", conform::status_name(c.status)}};
  if (!c.reason.empty()) j["reason"] = c.reason;
  j["max_err"] = c.max_err;
  j["tol"] = c.tol;
  j["max_abs"] = c.max_abs;
  if (!c.where.empty()) j["where"] = c.where;
  j["backend"] = c.backend_value;
  j["reference"] = c.reference_value;
  return j;
}

json row_json(const Row& r) {
  json j{{"id", r.id},
         {"kind", r.kind},
         {"status", conform::status_name(r.status)},
         {"reason", r.reason},
         {"seconds", r.seconds}};
  for (const auto& [k, v] : r.extra.items()) j[k] = v;
  json checks = json::array();
  for (const auto& c : r.checks) checks.push_back(comparison_json(c));
  j["checks"] = checks;
  return j;
}

// The reason of the worst sub-check with this status (the largest error over its tolerance): the
// parameter that is most wrong is the best hint at which kernel is.
std::string worst_reason(const std::vector<Comparison>& checks, Status status) {
  const Comparison* worst = nullptr;
  for (const auto& c : checks)
    if (c.status == status && (worst == nullptr || c.ratio() > worst->ratio() ||
                               (std::isnan(c.ratio()) && !std::isnan(worst->ratio()))))
      worst = &c;
  return worst != nullptr ? worst->reason : "";
}

bool any_status(const std::vector<Comparison>& checks, Status status) {
  for (const auto& c : checks)
    if (c.status == status) return true;
  return false;
}

// --- op problems ---------------------------------------------------------------------------------

// What one backend computed on one problem: the loss and every gradient after one forward and
// backward from the shared weights, with the model kept for the finite differences.
struct Outcome {
  std::unique_ptr<Session> session;
  float loss = 0;
  std::vector<std::vector<float>> grads;
};

dlhost_optimizer_desc plain_sgd() {
  dlhost_optimizer_desc o{};
  o.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  o.kind = DLHOST_OPTIMIZER_SGD;
  o.learning_rate = 0.01f;  // never applied: op problems do not call update
  return o;
}

Outcome forward_backward(const LoadedPlugin& plugin, const Graph& graph,
                         const std::vector<std::vector<float>>& weights,
                         const std::vector<InputData>& inputs, const dlhost_options& options) {
  Outcome o;
  o.session = std::make_unique<Session>(plugin, graph, plain_sgd(), options);
  o.session->load(weights, inputs);
  o.session->forward();
  o.session->backward();
  o.loss = o.session->loss();
  for (int32_t p = 0; p < graph.num_params(); ++p)
    o.grads.push_back(o.session->read_param(p, DLHOST_PARAM_GRAD));
  return o;
}

std::vector<int64_t> param_dims(const dlhost_param_desc& p) {
  return std::vector<int64_t>(p.dims, p.dims + p.rank);
}

const char* fd_verdict_name(conform::FdVerdict v) {
  return v == conform::FdVerdict::kAgrees      ? "agrees"
         : v == conform::FdVerdict::kDisagrees ? "disagrees"
                                               : "non-smooth";
}

// Which weights of one parameter to probe: the largest gradient, then some drawn among those at
// least a tenth of it (a weight with a zero gradient proves little).
std::vector<size_t> fd_samples(const std::vector<float>& g, std::mt19937_64& rng) {
  size_t top = 0;
  for (size_t i = 1; i < g.size(); ++i)
    if (std::fabs(g[i]) > std::fabs(g[top])) top = i;
  std::vector<size_t> picks{top};
  std::vector<size_t> large;
  for (size_t i = 0; i < g.size(); ++i)
    if (i != top && std::fabs(g[i]) >= 0.1 * std::fabs(g[top]) && g[i] != 0) large.push_back(i);
  for (int k = 1; k < kFdSamplesPerParam && !large.empty(); ++k) {
    size_t j = static_cast<size_t>(rng() % large.size());
    picks.push_back(large[j]);
    large.erase(large.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return picks;
}

// The three central differences (steps h, h/2, h/8) of the loss at weight `i` of parameter `p`,
// whose values are `values`; `loss_with(p, v)` is the loss with parameter `p` replaced by `v`.
conform::FdProbe probe_weight(
    int32_t p, size_t i, std::vector<float> values, float analytic, double loss,
    const std::function<double(int32_t, const std::vector<float>&)>& loss_with) {
  const float w = values[i];
  conform::FdProbe probe;
  probe.analytic = analytic;
  probe.loss = loss;
  auto central = [&](double h, double& plus, double& minus) {
    float up = static_cast<float>(w + h), down = static_cast<float>(w - h);
    values[i] = up;
    plus = loss_with(p, values);
    values[i] = down;
    minus = loss_with(p, values);
    return (static_cast<double>(up) - static_cast<double>(down)) / 2.0;
  };
  probe.h = central(conform::kFdStep, probe.plus_h, probe.minus_h);
  probe.h2 = central(conform::kFdStep / 2, probe.plus_h2, probe.minus_h2);
  probe.h8 = central(conform::kFdStep / 8, probe.plus_h8, probe.minus_h8);
  return probe;
}

// One judged sample taken into `c`: the worst so far (by error over tolerance, `worst`) is the
// one `c` shows, and the first disagreement fails it.
void take_fd_sample(Comparison& c, double& worst, const std::string& name, const std::string& where,
                    const conform::FdProbe& probe, const conform::FdJudgement& j) {
  double ratio = j.tol > 0 ? j.err / j.tol : 0;
  if (ratio > worst) {
    worst = ratio;
    c.max_err = j.err;
    c.max_abs = j.err;
    c.tol = j.tol;
    c.where = where;
    c.backend_value = probe.analytic;
    c.reference_value = j.fd;
  }
  if (j.verdict == conform::FdVerdict::kDisagrees && c.status != Status::kFailed) {
    c.status = Status::kFailed;
    c.reason = name + ": dL/d" + where + " is " + fmt("%.4g", probe.analytic) +
               " by backward but " + fmt("%.4g", j.fd) + " by central differences (tol " +
               fmt("%.2g", j.tol) + ")";
  }
}

// Central differences of the loss on a sample of weights against `outcome`'s gradients, on the
// backend that produced them: a check that needs no reference, so a wrong reference is caught too.
Comparison finite_differences(const std::string& name, const LoadedPlugin& plugin,
                              const conform::OpGraph& og,
                              const std::vector<std::vector<float>>& weights,
                              const std::vector<InputData>& inputs, const dlhost_options& options,
                              double eps, Outcome& outcome, json& samples) {
  const Graph& graph = *og.graph;
  // The loss with parameter `p` replaced by `values`. Dropout's mask changes with every forward,
  // so a step-dependent graph gets a fresh model per evaluation, whose first forward is step 0
  // as the analytic gradient's was.
  auto loss_with = [&](int32_t p, const std::vector<float>& values) -> double {
    if (!og.step_dependent) {
      outcome.session->write_param(p, values);
      outcome.session->forward();
      return outcome.session->loss();
    }
    Session fresh(plugin, graph, plain_sgd(), options);
    fresh.load(weights, inputs);
    fresh.write_param(p, values);
    fresh.forward();
    return fresh.loss();
  };

  Comparison c;
  c.name = name;
  std::mt19937_64 rng(kSeed);
  int agree = 0, total = 0;
  double worst = -1;
  for (int32_t p = 0; p < graph.num_params(); ++p) {
    const auto& g = outcome.grads[p];
    if (g.empty()) continue;
    const std::vector<size_t> picks = fd_samples(g, rng);
    const auto& desc = graph.param(p);
    for (size_t i : picks) {
      conform::FdProbe probe = probe_weight(p, i, weights[p], g[i], outcome.loss, loss_with);
      if (!og.step_dependent) outcome.session->write_param(p, weights[p]);
      conform::FdJudgement j = conform::judge_fd(probe, og.reduction_length, eps);
      ++total;
      std::string where =
          std::string(desc.name) + conform::multi_index(static_cast<int64_t>(i), param_dims(desc));
      samples.push_back(json{{"param", desc.name},
                             {"where", where},
                             {"analytic", probe.analytic},
                             {"fd", j.fd},
                             {"tol", j.tol},
                             {"verdict", fd_verdict_name(j.verdict)}});
      if (j.verdict == conform::FdVerdict::kNonSmooth) continue;
      if (j.verdict == conform::FdVerdict::kAgrees) ++agree;
      take_fd_sample(c, worst, name, where, probe, j);
    }
  }
  if (c.status != Status::kFailed && agree == 0) {
    c.status = Status::kMistrusted;
    c.reason = name + ": none of the " + std::to_string(total) +
               " sampled weights gave a smooth central difference";
  }
  return c;
}

// The verdict on an op problem (docs/conform.md, "Statuses"): `compared` are the checks against
// the reference, `no_reference` why there is none ("" when there is).
void op_verdict(Row& row, const std::vector<Comparison>& compared, const Comparison& fd_backend,
                const Comparison& fd_reference, const std::string& no_reference,
                bool reference_self_consistent) {
  if (fd_backend.status == Status::kFailed) {
    row.status = Status::kFailed;
    row.reason = any_status(compared, Status::kFailed) ? worst_reason(compared, Status::kFailed)
                                                       : fd_backend.reason;
  } else if (!no_reference.empty()) {
    row.status = Status::kSkipped;
    row.reason = no_reference + "; the backend's own finite differences: " +
                 conform::status_name(fd_backend.status);
  } else if (any_status(compared, Status::kFailed)) {
    if (!reference_self_consistent) {
      row.status = Status::kMistrusted;
      row.reason =
          "the backend disagrees with the reference, but the reference fails its own "
          "finite-difference check and the backend passes it: " +
          worst_reason(compared, Status::kFailed);
    } else {
      row.status = Status::kFailed;
      row.reason = worst_reason(compared, Status::kFailed);
    }
  } else if (!reference_self_consistent) {
    row.status = Status::kMistrusted;
    row.reason = fd_reference.reason.empty() ? "the reference's finite differences failed"
                                             : fd_reference.reason;
  } else if (any_status(row.checks, Status::kMistrusted)) {
    row.status = Status::kMistrusted;
    row.reason = worst_reason(row.checks, Status::kMistrusted);
  }
}

Row run_op_problem(const Descriptor& d, const Backend& backend, const Backend& reference,
                   const Settings& s) {
  Row row;
  row.id = d.str();
  row.kind = "op";
  conform::OpGraph og = conform::build_op_graph(d);
  const Graph& graph = *og.graph;
  const double rtol = conform::op_rtol(og.reduction_length, s.eps());
  row.extra["reduction_length"] = og.reduction_length;
  row.extra["rtol"] = rtol;
  auto weights = initial_params(graph, kSeed);
  auto inputs = synthetic_inputs(graph, kSeed);
  dlhost_options options = backend_options(s), ref_options = reference_options(s);

  Outcome b;
  try {
    b = forward_backward(*backend.plugin, graph, weights, inputs, options);
  } catch (const Error& e) {
    row.status = e.code() == DLHOST_CODE_UNIMPLEMENTED ? Status::kUnimplemented : Status::kFailed;
    row.reason = e.what();
    row.needs_undeclared_op = ops_gap(*backend.plugin, *graph.view()).has_value();
    return row;
  }

  Outcome r;
  std::string no_reference;
  try {
    r = forward_backward(*reference.plugin, graph, weights, inputs, ref_options);
  } catch (const Error& e) {
    no_reference = "reference " + reference.plugin->name +
                   (e.code() == DLHOST_CODE_UNIMPLEMENTED ? " lacks it: " : " failed: ") + e.what();
  }

  if (no_reference.empty()) {
    row.checks.push_back(conform::compare_arrays("loss", {b.loss}, {r.loss}, {}, rtol));
    for (int32_t p = 0; p < graph.num_params(); ++p)
      row.checks.push_back(conform::compare_arrays(std::string("grad ") + graph.param(p).name,
                                                   b.grads[p], r.grads[p],
                                                   param_dims(graph.param(p)), rtol));
  }
  const std::vector<Comparison> compared = row.checks;  // against the reference
  // Errors of the backend during the finite differences fail the problem like any other.
  Comparison fd_backend, fd_reference;
  json samples_backend = json::array(), samples_reference = json::array();
  try {
    fd_backend = finite_differences("fd backend", *backend.plugin, og, weights, inputs, options,
                                    s.eps(), b, samples_backend);
  } catch (const Error& e) {
    row.status = Status::kFailed;
    row.reason = std::string("during finite differences: ") + e.what();
    return row;
  }
  row.checks.push_back(fd_backend);
  row.extra["fd_backend"] = samples_backend;
  bool reference_self_consistent = true;
  if (no_reference.empty()) {
    try {
      fd_reference = finite_differences("fd reference", *reference.plugin, og, weights, inputs,
                                        ref_options, conform::kEpsF32, r, samples_reference);
      row.checks.push_back(fd_reference);
      row.extra["fd_reference"] = samples_reference;
      reference_self_consistent = fd_reference.status != Status::kFailed;
    } catch (const Error&) {
      reference_self_consistent = false;
    }
  }

  op_verdict(row, compared, fd_backend, fd_reference, no_reference, reference_self_consistent);
  return row;
}

// --- network problems ----------------------------------------------------------------------------

struct Trajectory {
  std::vector<float> losses;
  std::vector<std::vector<float>> final_weights;
};

Trajectory train(const LoadedPlugin& plugin, const Graph& graph,
                 const dlhost_optimizer_desc& optimizer,
                 const std::vector<std::vector<float>>& weights,
                 const std::vector<InputData>& inputs, const dlhost_options& options,
                 int64_t steps) {
  Session session(plugin, graph, optimizer, options);
  session.load(weights, inputs);
  Trajectory t;
  for (int64_t i = 0; i < steps; ++i) {
    session.forward();
    session.backward();
    session.update();
    t.losses.push_back(session.loss());
  }
  for (int32_t p = 0; p < graph.num_params(); ++p)
    t.final_weights.push_back(session.read_param(p, DLHOST_PARAM_VALUE));
  return t;
}

// The parameters' updates after `steps` steps, model-wide and one by one, into `row`; whether
// any parameter moved on both backends.
// True when parameter `p` is the bias of the layer that makes an attention's keys: it adds
// q . b to every score of a row, which softmax cancels, so its gradient is zero up to rounding
// (GPT-2 and BERT have one per layer). AdamW turns that noise into full-size steps that differ
// between two correct backends: there is nothing to compare.
bool gradient_cancelled_by_softmax(const Graph& graph, int32_t p) {
  const dlhost_param_desc& param = graph.param(p);
  if (param.role != DLHOST_PARAM_BIAS) return false;
  const int32_t keys = graph.node(param.node).output;
  for (int32_t i = 0; i < graph.view()->num_nodes; ++i) {
    const dlhost_node& n = graph.node(i);
    if (n.op == DLHOST_OP_ATTENTION && n.num_inputs == 3 && n.inputs[1] == keys) return true;
  }
  return false;
}

bool compare_network_updates(Row& row, const Graph& graph,
                             const std::vector<std::vector<float>>& weights, const Trajectory& b,
                             const Trajectory& r, int64_t steps, double eps) {
  // The updates are held to a looser bound than the loss: in a ReLU network a pre-activation
  // within rounding of zero (batch norm centres them there) flips between two correct backends
  // and changes the gradients it feeds by a few percent. Measured on ResNet-56 at batch 2: losses
  // agree to 2e-6, one step's model-wide update to 1e-2, single batch-norm shifts to 5e-2. A wrong
  // kernel is off by far more (the LSTM bug this check caught produced NaN); the ops' own checks
  // are the precise ones.
  constexpr double kUpdateSlack = 20.0;      // model-wide: 2e-2 * 2^(N-1)
  constexpr double kParamUpdateSlack = 4.0;  // one parameter: 4x the model-wide bound
  const double update_rtol = conform::network_rtol(static_cast<int>(steps), eps) * kUpdateSlack;
  {
    std::vector<float> all_initial, all_backend, all_reference;
    for (int32_t p = 0; p < graph.num_params(); ++p) {
      all_initial.insert(all_initial.end(), weights[p].begin(), weights[p].end());
      all_backend.insert(all_backend.end(), b.final_weights[p].begin(), b.final_weights[p].end());
      all_reference.insert(all_reference.end(), r.final_weights[p].begin(),
                           r.final_weights[p].end());
    }
    row.checks.push_back(conform::compare_updates("update of all parameters", all_initial,
                                                  all_backend, all_reference, update_rtol));
  }
  bool any_moved = false;
  for (int32_t p = 0; p < graph.num_params(); ++p) {
    Comparison c = conform::compare_updates(std::string("update ") + graph.param(p).name,
                                            weights[p], b.final_weights[p], r.final_weights[p],
                                            update_rtol * kParamUpdateSlack);
    any_moved = any_moved || c.status != Status::kMistrusted;
    // One parameter neither backend moved (a bias behind a dead unit) says nothing either way.
    if (c.status == Status::kMistrusted) c.status = Status::kSkipped;
    if (gradient_cancelled_by_softmax(graph, p) && c.status == Status::kFailed) {
      c.status = Status::kSkipped;
      c.reason = "a key bias: softmax cancels its gradient, both backends move it by rounding";
    }
    row.checks.push_back(c);
  }
  return any_moved;
}

Row run_network_problem(const Descriptor& d, const NetworkRef& net, const Backend& backend,
                        const Backend& reference, const Settings& s) {
  Row row;
  row.id = d.str();
  row.kind = "network";
  const int64_t batch = d.get_int("batch"), steps = d.get_int("steps");
  dlhost_options net_options;
  std::unique_ptr<Graph> graph;
  try {
    graph = build_network(*net.plugin, net.index, batch, &net_options);
  } catch (const Error& e) {
    row.status = Status::kSkipped;
    row.reason = std::string("the network cannot be built: ") + e.what();
    return row;
  }
  // A network plugin older than ABI 1.4 hands a shorter struct: read what it has.
  const dlhost_optimizer_desc optimizer = sdk::whole_optimizer(*net.info->optimizer);
  auto weights = initial_params(*graph, kSeed);
  auto inputs = synthetic_inputs(*graph, kSeed);
  dlhost_options options = backend_options(s);
  row.extra["params"] = graph->param_count();

  Trajectory b, r;
  try {
    b = train(*backend.plugin, *graph, optimizer, weights, inputs, options, steps);
  } catch (const Error& e) {
    row.status = e.code() == DLHOST_CODE_UNIMPLEMENTED ? Status::kUnimplemented : Status::kFailed;
    row.reason = e.what();
    return row;
  }
  try {
    r = train(*reference.plugin, *graph, optimizer, weights, inputs, reference_options(s), steps);
  } catch (const Error& e) {
    row.status = Status::kSkipped;
    row.reason = "reference " + reference.plugin->name +
                 (e.code() == DLHOST_CODE_UNIMPLEMENTED ? " lacks it: " : " failed: ") + e.what();
    return row;
  }
  row.extra["losses"] = json{{"backend", b.losses}, {"reference", r.losses}};
  std::vector<double> tolerances;
  for (int64_t i = 1; i <= steps; ++i)
    tolerances.push_back(conform::network_rtol(static_cast<int>(i), s.eps()));
  row.extra["loss_rtol"] = tolerances;
  row.checks.push_back(conform::compare_losses(b.losses, r.losses, s.eps()));
  const bool any_moved = compare_network_updates(row, *graph, weights, b, r, steps, s.eps());
  if (any_status(row.checks, Status::kFailed)) {
    // The loss first: it is what a person compares by eye; then the parameter most off.
    row.status = Status::kFailed;
    row.reason = row.checks.front().status == Status::kFailed
                     ? row.checks.front().reason
                     : worst_reason(row.checks, Status::kFailed);
  } else if (row.checks.front().status == Status::kMistrusted) {
    row.status = Status::kMistrusted;
    row.reason = row.checks.front().reason;
  } else if (!any_moved) {
    row.status = Status::kMistrusted;
    row.reason = "no parameter moved in " + std::to_string(steps) +
                 " steps on the reference: the updates were not checked";
  }
  return row;
}

// --- the command
// -----------------------------------------------------------------------------------

std::string quote(const std::string& s) {
  if (s.find_first_of(" '\"$\\") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string rerun_line(const Settings& s, const std::string& id) {
  std::string line = "dlhost conform --backend " + quote(s.backend);
  if (s.reference != kDefaultReference) line += " --reference " + quote(s.reference);
  if (s.threads != 0) line += " --threads " + std::to_string(s.threads);
  if (s.precision != "fp32") line += " --precision " + s.precision;
  return line + " --case '" + id + "'";
}

void print_row(const Row& row) {
  double ratio = row.worst_ratio();
  std::string figure = ratio >= 0 ? fmt("%8.3g", ratio) : std::string("       -");
  std::printf("%-13s %7.2fs %s  %s\n", conform::status_name(row.status), row.seconds,
              figure.c_str(), row.id.c_str());
  if (row.status != Status::kPassed && !row.reason.empty())
    std::printf("%-13s %s\n", "", row.reason.c_str());
  std::fflush(stdout);
}

// A planned problem: a descriptor, or a row already decided (a network left out by size).
struct Planned {
  explicit Planned(Descriptor d, const NetworkRef* n = nullptr)
      : descriptor(std::move(d)), network(n) {}
  Descriptor descriptor;
  const NetworkRef* network = nullptr;
  bool decided = false;
  Row row;
};

// The backend under test and the reference; 0, or the exit code after printing why not.
int resolve_backends(const Settings& s, const PluginRegistry& registry,
                     std::vector<std::unique_ptr<PluginRegistry>>& loaded, Backend& backend,
                     Backend& reference) {
  for (auto [given, role, out] : {std::make_tuple(s.backend, "backend", &backend),
                                  std::make_tuple(s.reference, "reference", &reference)}) {
    std::string error = resolve_backend(registry, loaded, given, role, *out);
    if (error.empty()) continue;
    std::fprintf(stderr, "dlhost conform: %s\n", error.c_str());
    if (std::string(role) == "reference" && given == kDefaultReference)
      std::fprintf(stderr,
                   "dlhost conform: the default reference is %s (plugins/cpu_reference); pass "
                   "--reference NAME|PATH to use another\n",
                   kDefaultReference);
    return 2;
  }
  return 0;
}

int unknown_network(const std::vector<NetworkRef>& networks, const std::string& name) {
  std::string names;
  for (const auto& n : networks) names += (names.empty() ? "" : ", ") + n.name;
  std::fprintf(stderr, "dlhost conform: no network '%s' (networks found: %s)\n", name.c_str(),
               names.empty() ? "none" : names.c_str());
  return 2;
}

// --case: the problems named, checked now; 0 or the exit code.
int plan_named(const Settings& s, const std::vector<NetworkRef>& networks,
               std::vector<Planned>& plan) {
  for (const auto& text : s.cases) {
    Planned p(conform::parse_descriptor(text));
    if (p.descriptor.kind() == "net") {
      p.network = find_network(networks, p.descriptor.name());
      if (p.network == nullptr) return unknown_network(networks, p.descriptor.name());
      if (p.descriptor.get_int("batch") < 1 || p.descriptor.get_int("steps") < 1)
        throw conform::DescriptorError(text + ": batch and steps must be >= 1");
    } else {
      conform::build_op_graph(p.descriptor);  // refuse a shape the op cannot have, now
    }
    plan.push_back(std::move(p));
  }
  return 0;
}

// --ops: every op's problems at the chosen shapes; 0 or the exit code.
int plan_ops(const Settings& s, std::vector<Planned>& plan) {
  std::vector<std::string> ops = s.ops;
  if (ops.empty() || (ops.size() == 1 && ops[0] == "all")) ops = conform::op_names();
  if (ops.size() == 1 && ops[0] == "none") ops.clear();
  for (const auto& op : ops) {
    if (std::find(conform::op_names().begin(), conform::op_names().end(), op) ==
        conform::op_names().end()) {
      std::string names;
      for (const auto& n : conform::op_names()) names += (names.empty() ? "" : ", ") + n;
      std::fprintf(stderr, "dlhost conform: no op '%s' (ops: %s; or all, none)\n", op.c_str(),
                   names.c_str());
      return 2;
    }
    auto shapes = s.shapes == "medium" ? conform::Shapes::kMedium : conform::Shapes::kSmall;
    for (auto& d : conform::op_problems(op, shapes)) plan.emplace_back(std::move(d));
  }
  return 0;
}

// A network too large to check by default, decided SKIPPED without running.
void skip_if_large(const NetworkRef& n, Planned& p) {
  int64_t params = -1;
  try {
    dlhost_options none_options;
    params = build_network(*n.plugin, n.index, 1, &none_options)->param_count();
  } catch (const Error&) {
    // Left to the run, which reports why it cannot be built.
  }
  if (params <= kDefaultMaxNetworkParams) return;
  p.decided = true;
  p.row.id = p.descriptor.str();
  p.row.kind = "network";
  p.row.status = Status::kSkipped;
  p.row.reason = fmt("%.1fM", static_cast<double>(params) / 1e6) +
                 " parameters, above the default limit of 20M; pass --networks " + n.name +
                 " to check it";
}

// --networks: the networks' training checks (by default every one under the size limit); 0 or
// the exit code.
int plan_networks(const Settings& s, const std::vector<NetworkRef>& networks,
                  std::vector<Planned>& plan) {
  bool by_size = s.networks.empty();
  bool none = s.networks.size() == 1 && s.networks[0] == "none";
  bool all = s.networks.size() == 1 && s.networks[0] == "all";
  std::vector<const NetworkRef*> chosen;
  if (by_size || all) {
    for (const auto& n : networks) chosen.push_back(&n);
  } else if (!none) {
    for (const auto& name : s.networks) {
      const NetworkRef* n = find_network(networks, name);
      if (n == nullptr) return unknown_network(networks, name);
      chosen.push_back(n);
    }
  }
  for (const NetworkRef* n : chosen) {
    Planned p(conform::network_descriptor(n->name, 2, s.steps), n);
    if (by_size) skip_if_large(*n, p);
    plan.push_back(std::move(p));
  }
  return 0;
}

Row run_planned(Planned& p, const Backend& backend, const Backend& reference, const Settings& s) {
  if (p.decided) return p.row;
  auto t0 = Clock::now();
  Row row;
  try {
    row = p.network != nullptr
              ? run_network_problem(p.descriptor, *p.network, backend, reference, s)
              : run_op_problem(p.descriptor, backend, reference, s);
  } catch (const std::exception& e) {
    // Anything not foreseen (a host-side error) fails the problem, never the whole run.
    row.id = p.descriptor.str();
    row.kind = p.network != nullptr ? "network" : "op";
    row.status = Status::kFailed;
    row.reason = std::string("unexpected error: ") + e.what();
  }
  row.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return row;
}

void print_summary(const std::vector<Row>& rows, std::map<Status, int>& counts, const Settings& s,
                   const Backend& backend, const Backend& reference, double seconds) {
  std::vector<const Row*> to_rerun;
  for (const auto& r : rows)
    if (r.status == Status::kFailed || r.status == Status::kMistrusted) to_rerun.push_back(&r);
  if (!to_rerun.empty()) {
    std::printf("\nto rerun one alone:\n");
    for (const Row* r : to_rerun)
      std::printf("  %-10s %s\n", conform::status_name(r->status), rerun_line(s, r->id).c_str());
  }
  std::printf(
      "%d passed, %d failed, %d unimplemented, %d skipped, %d mistrusted (%s vs %s, %.1f s)\n",
      counts[Status::kPassed], counts[Status::kFailed], counts[Status::kUnimplemented],
      counts[Status::kSkipped], counts[Status::kMistrusted], backend.plugin->name.c_str(),
      reference.plugin->name.c_str(), seconds);
  std::fflush(stdout);
}

json tolerances_json(const Settings& s) {
  const std::string eps = "eps = " + fmt("%g", s.eps()) + " (" + s.precision + ")";
  const std::string base = fmt("%g", conform::network_rtol(1, s.eps()));
  return json{
      {"eps", eps},
      {"op", "rtol = " + fmt("%g", conform::kOpToleranceFactor) +
                 " * eps * sqrt(K); |b - r| <= rtol * (|r| + rms(r))"},
      {"finite_differences", "|g - fd| <= " + fmt("%g", conform::kFdRtol) + " * max(|g|, |fd|) + " +
                                 fmt("%g", conform::kFdNoise) +
                                 " * eps * sqrt(K) * |L| / h2; fd by central differences at h2 = " +
                                 fmt("%g", conform::kFdStep / 2) +
                                 ", checked against h = " + fmt("%g", conform::kFdStep)},
      {"network", "loss at step s: |b - r| <= " + base +
                      " * 2^(s-1) * |r|; update after N steps: ||dw_b - dw_r|| <= " + base +
                      " * 20 * 2^(N-1) * ||dw_r||"}};
}

// The --json document (dlhost-conform/1).
json conform_json(const std::vector<Row>& rows, std::map<Status, int>& counts, const Settings& s,
                  const Backend& backend, const Backend& reference, double seconds) {
  auto plugin_json = [](const Backend& b) {
    return json{{"given", b.given},
                {"name", b.plugin->name},
                {"version", b.plugin->version},
                {"path", b.plugin->path}};
  };
  json checks = json::array();
  for (const auto& r : rows) checks.push_back(row_json(r));
  return json{{"schema", "dlhost-conform/1"},
              {"dlhost", {{"version", dlhost_version()}, {"revision", dlhost_git_revision()}}},
              {"backend", plugin_json(backend)},
              {"reference", plugin_json(reference)},
              {"settings",
               {{"shapes", s.shapes},
                {"steps", s.steps},
                {"threads", s.threads},
                {"seed", kSeed},
                {"precision", s.precision}}},
              {"tolerances", tolerances_json(s)},
              {"checks", checks},
              {"summary",
               {{"passed", counts[Status::kPassed]},
                {"failed", counts[Status::kFailed]},
                {"unimplemented", counts[Status::kUnimplemented]},
                {"skipped", counts[Status::kSkipped]},
                {"mistrusted", counts[Status::kMistrusted]},
                {"seconds", seconds}}}};
}

// Says on stderr, every kHeartbeat while one problem runs, which problem it is and for how long:
// an AlexNet-sized convolution on a plain-loop backend takes minutes, and a silent run looks hung.
class Heartbeat {
 public:
  static constexpr std::chrono::seconds kHeartbeat{10};
  Heartbeat(Clock::time_point start, size_t total) : start_(start), total_(total) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  void begin(size_t index, const std::string& id) {
    std::lock_guard<std::mutex> lock(mutex_);
    index_ = index;
    id_ = id;
    began_ = Clock::now();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, kHeartbeat, [this] { return done_; })) {
      auto now = Clock::now();
      double on = std::chrono::duration<double>(now - began_).count();
      if (id_.empty() || on < static_cast<double>(kHeartbeat.count())) continue;
      std::fprintf(stderr, "dlhost conform: [%zu/%zu] %s running for %.0f s (%.0f s in all)\n",
                   index_ + 1, total_, id_.c_str(), on,
                   std::chrono::duration<double>(now - start_).count());
      std::fflush(stderr);
    }
  }
  Clock::time_point start_;
  size_t total_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  size_t index_ = 0;
  std::string id_;
  Clock::time_point began_ = Clock::now();
  std::thread thread_;
};

// --strict: the op problems of ops the backend declares (its published capabilities; without
// them, every op of its ABI minor) that did not PASS, as "op=...: STATUS" lines; a problem whose
// graph also needs an op the backend does not declare is not counted (it cannot run there).
std::vector<std::string> strict_misses(const std::vector<Row>& rows, const Backend& backend) {
  std::set<std::string> declared;
  for (int32_t op : backend_caps(*backend.plugin).ops) declared.insert(sdk::op_name(op));
  std::vector<std::string> out;
  for (const auto& r : rows) {
    if (r.kind != "op" || r.status == Status::kPassed || r.needs_undeclared_op) continue;
    std::string op = r.id.substr(3, r.id.find(',') - 3);  // "op=NAME,..."
    if (declared.count(op)) out.push_back(std::string(conform::status_name(r.status)) + " " + r.id);
  }
  return out;
}

// The exit code of a finished run, after saying on stderr why it is not 0: any FAILED; nothing
// PASSED at all, no problem run included (an empty backend or an empty selection must not look
// conformant to `conform && ship`); with --strict,
// a problem of a declared op that did not PASS. MISTRUSTED alone says the check was weak, not
// that the backend is wrong: reported, not failed.
int conform_exit_code(const std::vector<Row>& rows, std::map<Status, int>& counts,
                      const Settings& s, const Backend& backend) {
  if (counts[Status::kFailed] > 0) return 1;
  if (rows.empty()) {
    // `--ops none --networks none`: a gate that checked nothing must not pass.
    std::fprintf(stderr,
                 "dlhost conform: no problem was run (--ops and --networks chose none), so "
                 "nothing PASSED; exit status 1\n");
    return 1;
  }
  if (counts[Status::kPassed] == 0) {
    std::fprintf(stderr,
                 "dlhost conform: no problem PASSED (of %zu): %s implemented nothing that was "
                 "checked; exit status 1\n",
                 rows.size(), backend.plugin->name.c_str());
    return 1;
  }
  if (!s.strict) return 0;
  std::vector<std::string> misses = strict_misses(rows, backend);
  if (misses.empty()) return 0;
  std::fprintf(stderr,
               "dlhost conform: --strict: %zu problem%s of ops %s declares%s did not PASS:\n",
               misses.size(), misses.size() == 1 ? "" : "s", backend.plugin->name.c_str(),
               backend_caps(*backend.plugin).published
                   ? ""
                   : " (it publishes no capabilities: every op of its ABI is taken as declared)");
  for (const auto& m : misses) std::fprintf(stderr, "  %s\n", m.c_str());
  return 1;
}

// Writes `text` as the whole of the --json file (output/output_file.h: never through a link
// planted in a shared folder); false, having said why, when it cannot be written whole.
bool write_json_file(const std::string& path, const std::string& text) {
  try {
    output::write_whole_file(path, text);
    return true;
  } catch (const output::OutputError& e) {
    std::fprintf(stderr, "dlhost conform: cannot write the --json file: %s\n", e.what());
    return false;
  }
}

int run_conform(const Settings& s, const PluginRegistry& registry,
                const std::vector<NetworkRef>& networks) {
  auto start = Clock::now();
  std::vector<std::unique_ptr<PluginRegistry>> loaded;
  Backend backend, reference;
  if (int rc = resolve_backends(s, registry, loaded, backend, reference)) return rc;
  std::vector<Planned> plan;
  try {
    int rc = !s.cases.empty() ? plan_named(s, networks, plan) : plan_ops(s, plan);
    if (rc == 0 && s.cases.empty()) rc = plan_networks(s, networks, plan);
    if (rc != 0) return rc;
  } catch (const conform::DescriptorError& e) {
    std::fprintf(stderr, "dlhost conform: %s\n", e.what());
    return 2;
  }
  // Written (empty) now so a path that cannot be written is refused before minutes of checks;
  // the document replaces it at the end.
  if (!s.json_path.empty() && !write_json_file(s.json_path, "")) return 2;
  auto label = [](const Backend& b) {
    return b.plugin->name + " " + b.plugin->version + " (" + b.plugin->path + ")";
  };
  std::printf("dlhost conform: %s in precision %s against reference %s (fp32); %zu problem%s\n",
              label(backend).c_str(), s.precision.c_str(), label(reference).c_str(), plan.size(),
              plan.size() == 1 ? "" : "s");
  std::printf("%-13s %8s %8s  %s\n", "STATUS", "TIME", "ERR/TOL", "PROBLEM");
  std::fflush(stdout);

  std::vector<Row> rows;
  std::map<Status, int> counts;
  {
    Heartbeat heartbeat(start, plan.size());
    for (auto& p : plan) {
      heartbeat.begin(rows.size(), p.descriptor.str());
      rows.push_back(run_planned(p, backend, reference, s));
      print_row(rows.back());
      ++counts[rows.back().status];
    }
  }
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  print_summary(rows, counts, s, backend, reference, seconds);
  if (!s.json_path.empty() &&
      !write_json_file(s.json_path,
                       conform_json(rows, counts, s, backend, reference, seconds).dump(2) + "\n"))
    return 2;
  return conform_exit_code(rows, counts, s, backend);
}

}  // namespace

Command add_conform_command(CLI::App& app) {
  auto s = std::make_shared<Settings>();
  Command c;
  c.sub = app.add_subcommand(
      "conform",
      "Check a backend numerically against a reference backend: every op at odd shapes (forward, "
      "gradients, finite differences) and a few training steps of each network");
  CLI::App* sub = c.sub;
  sub->add_option("--backend", s->backend,
                  "Backend to check: a plugin name, or the path of a backend .so")
      ->required();
  sub->add_option("--reference", s->reference,
                  "Backend trusted as the answer: a name or a .so path")
      ->capture_default_str();
  sub->add_option("--ops", s->ops, "Ops to check, comma-separated, all (default) or none")
      ->delimiter(',');
  sub->add_option("--networks", s->networks,
                  "Networks to train for --steps steps, comma-separated, all, or none; default: "
                  "every network under 20M parameters")
      ->delimiter(',');
  sub->add_option("--steps", s->steps, "Training steps per network")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  sub->add_option("--shapes", s->shapes, "Problem sizes of the op checks")
      ->check(CLI::IsMember({"small", "medium"}))
      ->capture_default_str();
  sub->add_option("--threads", s->threads,
                  "CPU threads for both backends (0: their default; at most 4096, as the "
                  "backends and the threads case key take)")
      ->check(CLI::Range(int64_t{0}, sdk::kMaxThreads))
      ->capture_default_str();
  sub->add_option("--precision", s->precision,
                  "Precision mode of the backend checked (the reference runs fp32); the "
                  "tolerances scale with the mode's epsilon (docs/conform.md)")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}))
      ->capture_default_str();
  sub->add_option("--json", s->json_path, "Write every check as JSON to this file");
  sub->add_flag("--strict", s->strict,
                "Exit 1 unless every op problem of an op the backend declares (its capabilities) "
                "PASSED: for a vendor's CI");
  sub->add_option("--case", s->cases,
                  "Run only this problem, as printed: 'op=conv2d,n=3,...' or "
                  "'net=lenet,batch=2,steps=3' (repeatable; keys left out take defaults)");
  sub->footer(
      "Each problem prints a descriptor that --case takes back. Exit status: 0 when nothing "
      "FAILED and something PASSED (MISTRUSTED is reported, not failed), 1 on any FAILED, when "
      "no problem PASSED (also when none ran: --ops none --networks none), or with --strict when a "
      "declared op's problem did not PASS; 2 on a "
      "usage error. A problem running 10 s or more is named on stderr every 10 s. See "
      "docs/conform.md for what is checked and the tolerances.");
  c.run = [s](const PluginRegistry& registry, const std::vector<NetworkRef>& networks) {
    return run_conform(*s, registry, networks);
  };
  return c;
}

}  // namespace dlhost
