// runner.cpp — see runner.h. The timing loop is the paper's method: `warmup` untimed steps, then
// `iterations` timed steps; each phase ends with the backend's synchronize so a GPU backend's
// queued work is inside the timer that stops.
#include "runner.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>

#include "graph.h"
#include "host_api.h"
#include "plugin_registry.h"
#include "stats.h"
#include "synthetic.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// A case that cannot run here; not an error of the backend.
struct Skip {
  std::string reason;
};

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Peak resident set of this process: reset at case start (Linux clear_refs "5") so each case
// reads its own peak while cases still share one process.
void reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (f) f << "5";
}
uint64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// A float setting as the user wrote it (0.01, not 0.009999999776).
double as_written(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.7g", static_cast<double>(v));
  return std::strtod(buf, nullptr);
}

json summary_json(const Summary& s) {
  return json{{"mean", s.mean}, {"median", s.median}, {"min", s.min},      {"max", s.max},
              {"p5", s.p5},     {"p95", s.p95},       {"stddev", s.stddev}};
}

template <class T>
T get_or(const json& params, const char* key, T fallback) {
  auto it = params.find(key);
  if (it == params.end() || it->is_null()) return fallback;
  return it->get<T>();
}

struct ContextDeleter {
  const dlhost_backend_api* api;
  void operator()(dlhost_context* c) const { api->context_destroy(c); }
};
struct ModelDeleter {
  const dlhost_backend_api* api;
  void operator()(dlhost_model* m) const { api->model_destroy(m); }
};

// The case's `options:` for one plugin, as strings.
dlhost_options plugin_options(const json& params, const std::string& plugin) {
  dlhost_options opts;
  if (auto it = params.find("options"); it != params.end() && it->is_object()) {
    if (auto b = it->find(plugin); b != it->end() && b->is_object())
      for (const auto& [k, v] : b->items())
        opts.values[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  return opts;
}

// A backend also gets the keys every backend must honour.
dlhost_options backend_options(const json& params, const std::string& backend) {
  dlhost_options opts = plugin_options(params, backend);
  opts.values["threads"] = std::to_string(get_or<int64_t>(params, "threads", 0));
  opts.values["seed"] = std::to_string(get_or<int64_t>(params, "seed", 42));
  return opts;
}

void run_body(const CaseInput& in, const RunContext& ctx, json& rec) {
  const json& p = in.params;
  if (!in.skip_reason.empty()) throw Skip{in.skip_reason};

  // --- what the case needs -------------------------------------------------------------------
  std::string network_name = get_or<std::string>(p, "network", "");
  std::string backend_name = get_or<std::string>(p, "backend", "cpu_onednn");
  std::string comm = get_or<std::string>(p, "comm", "none");
  int64_t ranks = get_or<int64_t>(p, "ranks", 1);
  if (ranks > 1 || comm != "none")
    throw Skip{"data-parallel cases (ranks " + std::to_string(ranks) + ", comm '" + comm +
               "') need the communication layer, which this build of dlhost does not have yet"};

  const NetworkRef* net = find_network(*ctx.networks, network_name);
  if (net == nullptr) throw Skip{"network '" + network_name + "' is not installed here"};
  const LoadedPlugin* backend = ctx.registry->find(DLHOST_PLUGIN_BACKEND, backend_name);
  if (backend == nullptr) throw Skip{"backend '" + backend_name + "' is not installed here"};
  if (!backend->usable)
    throw Skip{"backend '" + backend_name + "' cannot run here: " + backend->unusable_reason};
  const dlhost_backend_api* api = backend->table->backend;

  int32_t device = static_cast<int32_t>(get_or<int64_t>(p, "device", 0));
  if (device < 0 || device >= api->device_count())
    throw Skip{"backend '" + backend_name + "' has no device " + std::to_string(device) +
               " here (" + std::to_string(api->device_count()) + " devices)"};
  const dlhost_device_info* dev = nullptr;
  check_status(api->device_info(device, &dev), "device_info");
  rec["backend"] = json{{"name", backend->name},
                        {"version", backend->version},
                        {"path", backend->path},
                        {"device",
                         {{"index", device},
                          {"name", dev->name ? dev->name : ""},
                          {"model", dev->model ? dev->model : ""},
                          {"cores", dev->cores},
                          {"isa", dev->isa ? dev->isa : ""},
                          {"memory_bytes", dev->memory_bytes},
                          {"library", dev->library ? dev->library : ""}}}};

  int64_t batch = get_or<int64_t>(p, "batch", 0);
  if (batch <= 0)
    batch = dev->kind == DLHOST_DEVICE_GPU ? net->info->gpu_batch : net->info->cpu_batch;
  int64_t warmup = get_or<int64_t>(p, "warmup", 5);
  int64_t iterations = get_or<int64_t>(p, "iterations", 20);
  double timeout_s = get_or<double>(p, "timeout", 600.0);
  uint64_t seed = static_cast<uint64_t>(get_or<int64_t>(p, "seed", 42));
  auto case_start = Clock::now();

  // --- graph ---------------------------------------------------------------------------------
  auto t = Clock::now();
  dlhost_options net_opts = plugin_options(p, net->plugin->name);
  std::unique_ptr<Graph> graph = build_network(*net->plugin, net->index, batch, &net_opts);
  double build_ms = ms_since(t);
  rec["network"] = json{{"name", net->name},
                        {"plugin", net->plugin->name},
                        {"batch", batch},
                        {"input_shape", graph->input_shape()},
                        {"params", graph->param_count()},
                        {"forward_flops_per_sample", graph->forward_flops_per_sample()}};

  // --- optimizer: the network's defaults, overridden per case ---------------------------------
  dlhost_optimizer_desc opt = *net->info->optimizer;
  opt.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  opt.learning_rate = get_or<float>(p, "lr", opt.learning_rate);
  opt.momentum = get_or<float>(p, "momentum", opt.momentum);
  opt.weight_decay = get_or<float>(p, "weight_decay", opt.weight_decay);
  opt.clip_norm = get_or<float>(p, "clip_norm", opt.clip_norm);

  // --- compile -------------------------------------------------------------------------------
  dlhost_options opts = backend_options(p, backend_name);
  dlhost_context* raw_ctx = nullptr;
  check_status(api->context_create(device, &opts, &raw_ctx), backend_name + " context_create");
  std::unique_ptr<dlhost_context, ContextDeleter> context(raw_ctx, ContextDeleter{api});
  t = Clock::now();
  dlhost_model* raw_model = nullptr;
  check_status(api->compile(context.get(), graph->view(), &opt, &opts, &raw_model),
               backend_name + " compile");
  std::unique_ptr<dlhost_model, ModelDeleter> model(raw_model, ModelDeleter{api});
  double compile_ms = ms_since(t);

  // --- weights and resident data -------------------------------------------------------------
  t = Clock::now();
  auto weights = initial_params(*graph, seed);
  for (int32_t i = 0; i < graph->num_params(); ++i)
    check_status(api->write_param(model.get(), i, DLHOST_PARAM_VALUE, weights[i].data(),
                                  weights[i].size() * 4),
                 "write_param " + std::string(graph->param(i).name));
  weights.clear();
  for (const auto& input : synthetic_inputs(*graph, seed))
    check_status(api->set_input(model.get(), input.tensor, input.bytes.data(), input.bytes.size()),
                 "set_input " + std::string(graph->tensor(input.tensor).name));
  check_status(api->synchronize(model.get()), "synchronize");
  double init_ms = ms_since(t);

  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  check_status(api->model_info(model.get(), &info), "model_info");
  rec["resolved"] = json{{"batch", batch},
                         {"threads_requested", get_or<int64_t>(p, "threads", 0)},
                         {"threads_used", info.threads},
                         {"optimizer",
                          {{"kind", "sgd"},
                           {"lr", as_written(opt.learning_rate)},
                           {"momentum", as_written(opt.momentum)},
                           {"weight_decay", as_written(opt.weight_decay)},
                           {"clip_norm", as_written(opt.clip_norm)}}},
                         {"implementation", info.implementation ? info.implementation : ""}};

  // --- training steps ------------------------------------------------------------------------
  std::vector<double> step_ms, fwd_ms, bwd_ms, upd_ms, losses;
  step_ms.reserve(iterations);
  fwd_ms.reserve(iterations);
  bwd_ms.reserve(iterations);
  upd_ms.reserve(iterations);
  losses.reserve(iterations);
  dlhost_model* m = model.get();
  bool timed_out = false;
  auto over_time = [&] { return ms_since(case_start) > timeout_s * 1000.0; };
  std::vector<double> warmup_losses;
  for (int64_t i = 0; i < warmup && !timed_out; ++i) {
    check_status(api->forward(m), "forward");
    check_status(api->backward(m, nullptr), "backward");
    check_status(api->update(m), "update");
    float loss = 0;
    check_status(api->read_loss(m, &loss), "read_loss");
    warmup_losses.push_back(loss);
    timed_out = over_time();
  }
  for (int64_t i = 0; i < iterations && !timed_out; ++i) {
    auto t0 = Clock::now();
    check_status(api->forward(m), "forward");
    check_status(api->synchronize(m), "synchronize");
    auto t1 = Clock::now();
    check_status(api->backward(m, nullptr), "backward");
    check_status(api->synchronize(m), "synchronize");
    auto t2 = Clock::now();
    check_status(api->update(m), "update");
    check_status(api->synchronize(m), "synchronize");
    auto t3 = Clock::now();
    auto ms = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    fwd_ms.push_back(ms(t0, t1));
    bwd_ms.push_back(ms(t1, t2));
    upd_ms.push_back(ms(t2, t3));
    step_ms.push_back(ms(t0, t3));
    float loss = 0;
    check_status(api->read_loss(m, &loss), "read_loss");  // outside the timers
    losses.push_back(loss);
    if (!std::isfinite(loss))
      throw Error(DLHOST_CODE_INTERNAL,
                  "loss is " + std::to_string(loss) + " at timed iteration " + std::to_string(i));
    timed_out = over_time();
  }
  uint64_t backend_bytes = 0;
  check_status(api->memory_in_use(m, &backend_bytes), "memory_in_use");

  Summary step = summarize(step_ms);
  json timing;
  timing["unit"] = "ms";
  timing["warmup"] = warmup;
  timing["iterations"] = static_cast<int64_t>(step_ms.size());
  timing["build_ms"] = build_ms;
  timing["compile_ms"] = compile_ms;
  timing["init_ms"] = init_ms;
  timing["step"] = summary_json(step);
  timing["forward"] = summary_json(summarize(fwd_ms));
  timing["backward"] = summary_json(summarize(bwd_ms));
  timing["update"] = summary_json(summarize(upd_ms));
  timing["samples_per_second"] = step.median > 0 ? 1000.0 * batch / step.median : 0.0;
  timing["samples_per_second_mean"] = step.mean > 0 ? 1000.0 * batch / step.mean : 0.0;
  // Training costs about 3x the forward FLOPs (forward, backward data, backward weights).
  timing["train_gflops_per_second_est"] =
      step.median > 0 ? 3.0 * graph->forward_flops() / (step.median * 1e6) : 0.0;
  timing["samples"] =
      json{{"step", step_ms}, {"forward", fwd_ms}, {"backward", bwd_ms}, {"update", upd_ms}};
  rec["timing"] = timing;
  rec["loss"] =
      json{{"warmup_first", warmup_losses.empty() ? json(nullptr) : json(warmup_losses.front())},
           {"first", losses.empty() ? json(nullptr) : json(losses.front())},
           {"last", losses.empty() ? json(nullptr) : json(losses.back())},
           {"values", losses}};
  rec["memory"] = json{{"peak_rss_bytes", peak_rss_bytes()}, {"backend_bytes", backend_bytes}};
  if (timed_out) {
    rec["status"] = kStatusTimeout;
    rec["reason"] = "case exceeded its timeout of " + std::to_string(timeout_s) + " s after " +
                    std::to_string(step_ms.size()) + " of " + std::to_string(iterations) +
                    " timed iterations";
  } else if (step_ms.empty()) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, "no timed iterations");
  }
}

}  // namespace

nlohmann::ordered_json run_case(const CaseInput& input, const RunContext& ctx) {
  json rec;
  rec["schema_version"] = kResultsSchemaVersion;
  rec["case_id"] = input.id;
  rec["status"] = kStatusOk;
  rec["reason"] = "";
  rec["suite"] = json{{"name", ctx.suite_name}, {"path", ctx.suite_path}, {"source", input.source}};
  rec["started_at"] = utc_now();
  rec["params"] = input.params;
  auto start = Clock::now();
  reset_peak_rss();
  try {
    run_body(input, ctx, rec);
  } catch (const Skip& s) {
    rec["status"] = kStatusSkipped;
    rec["reason"] = s.reason;
  } catch (const Error& e) {
    std::string what = e.what();
    if (e.code() == DLHOST_CODE_UNIMPLEMENTED) {
      rec["status"] = kStatusSkipped;
      rec["reason"] = "UNIMPLEMENTED: " + what;
    } else if (e.code() == DLHOST_CODE_RESOURCE_EXHAUSTED ||
               what.find("out of memory") != std::string::npos ||
               what.find("out_of_memory") != std::string::npos) {
      rec["status"] = kStatusOom;
      rec["reason"] = std::string(code_name(e.code())) + ": " + what;
    } else {
      rec["status"] = kStatusFailed;
      rec["reason"] = std::string(code_name(e.code())) + ": " + what;
    }
  } catch (const std::bad_alloc&) {
    rec["status"] = kStatusOom;
    rec["reason"] = "RESOURCE_EXHAUSTED: out of memory (std::bad_alloc in the host)";
  } catch (const std::exception& e) {
    // Also what a plugin's C++ exception becomes if it escapes the C boundary.
    rec["status"] = kStatusFailed;
    rec["reason"] = std::string("INTERNAL: ") + e.what();
  } catch (...) {
    rec["status"] = kStatusFailed;
    rec["reason"] =
        "INTERNAL: an exception of unknown type escaped (a plugin broke the C ABI rule)";
  }
  rec["duration_s"] = ms_since(start) / 1000.0;
  rec["environment"] = ctx.environment;
  return rec;
}

}  // namespace dlhost
