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

#include "data_parallel.h"
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
  std::string comm_name = get_or<std::string>(p, "comm", "none");
  int64_t ranks = get_or<int64_t>(p, "ranks", 1);
  const RankEnv& world = ctx.rank;
  if (ranks != world.size)
    throw Skip{"the case asks for " + std::to_string(ranks) + " ranks but runs in a world of " +
               std::to_string(world.size) +
               " (multi-rank cases need the case's own process: drop --no-isolate)"};
  if (ranks > 1 && comm_name == "none")
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                "a case of " + std::to_string(ranks) + " ranks needs a comm (e.g. comm: mpi)");

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

  int64_t global_batch = get_or<int64_t>(p, "batch", 0);
  if (global_batch <= 0)
    global_batch = dev->kind == DLHOST_DEVICE_GPU ? net->info->gpu_batch : net->info->cpu_batch;
  // Strong scaling (the paper's choice) splits a fixed global mini-batch over the ranks; weak
  // scaling gives every rank the whole `batch`.
  bool weak = get_or<std::string>(p, "scaling", "strong") == "weak";
  int64_t batch = global_batch;
  if (weak) {
    global_batch = batch * world.size;
  } else if (global_batch % world.size != 0) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                "strong scaling: the global mini-batch " + std::to_string(global_batch) +
                    " does not divide over " + std::to_string(world.size) + " ranks");
  } else {
    batch = global_batch / world.size;
  }

  // --- the communicator ----------------------------------------------------------------------
  std::unique_ptr<CommSession> comm;
  if (comm_name != "none") {
    const LoadedPlugin* cp = ctx.registry->find(DLHOST_PLUGIN_COMM, comm_name);
    if (cp == nullptr) throw Skip{"comm '" + comm_name + "' is not installed here"};
    if (!cp->usable) throw Skip{"comm '" + comm_name + "' cannot run here: " + cp->unusable_reason};
    comm = std::make_unique<CommSession>(cp, world, plugin_options(p, comm_name));
  }
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
  for (const auto& input : synthetic_inputs(*graph, seed, batch * world.rank))
    check_status(api->set_input(model.get(), input.tensor, input.bytes.data(), input.bytes.size()),
                 "set_input " + std::string(graph->tensor(input.tensor).name));
  check_status(api->synchronize(model.get()), "synchronize");
  double init_ms = ms_since(t);

  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  check_status(api->model_info(model.get(), &info), "model_info");
  rec["resolved"] = json{{"batch", batch},
                         {"global_batch", global_batch},
                         {"threads_requested", get_or<int64_t>(p, "threads", 0)},
                         {"threads_used", info.threads},
                         {"optimizer",
                          {{"kind", "sgd"},
                           {"lr", as_written(opt.learning_rate)},
                           {"momentum", as_written(opt.momentum)},
                           {"weight_decay", as_written(opt.weight_decay)},
                           {"clip_norm", as_written(opt.clip_norm)}}},
                         {"implementation", info.implementation ? info.implementation : ""}};

  // --- data parallelism: same weights everywhere, gradients averaged every step ---------------
  std::unique_ptr<DataParallel> dp;
  if (comm) {
    dp = std::make_unique<DataParallel>(comm->api(), comm->comm(), world.size, api, model.get(),
                                        graph->num_params(), get_or<double>(p, "bucket_mb", 25.0),
                                        get_or<bool>(p, "overlap", true));
    dp->broadcast_parameters();
    dp->barrier();
  }

  // --- training steps ------------------------------------------------------------------------
  std::vector<double> step_ms, fwd_ms, bwd_ms, comm_ms, upd_ms, allreduce_ms, losses;
  for (auto* v : {&step_ms, &fwd_ms, &bwd_ms, &comm_ms, &upd_ms, &allreduce_ms, &losses})
    v->reserve(static_cast<size_t>(iterations));
  dlhost_model* m = model.get();
  const dlhost_grad_ready* ready = dp ? dp->grad_ready() : nullptr;
  DataParallelStats dp_stats;
  bool timed_out = false;
  // Every rank must stop at the same step, or the others would wait in an all-reduce forever.
  auto over_time = [&] {
    std::vector<double> late{ms_since(case_start) > timeout_s * 1000.0 ? 1.0 : 0.0};
    if (dp) dp->all_reduce_max(late);
    return late[0] > 0;
  };
  std::vector<double> warmup_losses;
  int64_t step_index = 0;
  auto progress = [&](int phase) {
    if (ctx.on_progress) ctx.on_progress(step_index, phase);
  };
  for (int64_t i = 0; i < warmup && !timed_out; ++i, ++step_index) {
    progress(0);
    check_status(api->forward(m), "forward");
    progress(1);
    check_status(api->backward(m, ready), "backward");
    progress(2);
    if (dp) dp->finish(nullptr);
    progress(3);
    check_status(api->update(m), "update");
    float loss = 0;
    check_status(api->read_loss(m, &loss), "read_loss");
    warmup_losses.push_back(loss);
    timed_out = over_time();
  }
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  for (int64_t i = 0; i < iterations && !timed_out; ++i, ++step_index) {
    progress(0);
    auto t0 = Clock::now();
    check_status(api->forward(m), "forward");
    check_status(api->synchronize(m), "synchronize");
    auto t1 = Clock::now();
    progress(1);
    check_status(api->backward(m, ready), "backward");
    check_status(api->synchronize(m), "synchronize");
    auto t2 = Clock::now();
    progress(2);
    if (dp) dp->finish(&dp_stats);
    auto t3 = Clock::now();
    progress(3);
    check_status(api->update(m), "update");
    check_status(api->synchronize(m), "synchronize");
    auto t4 = Clock::now();
    fwd_ms.push_back(ms(t0, t1));
    bwd_ms.push_back(ms(t1, t2));
    comm_ms.push_back(ms(t2, t3));
    upd_ms.push_back(ms(t3, t4));
    step_ms.push_back(ms(t0, t4));
    allreduce_ms.push_back(dp ? dp_stats.allreduce_ms : 0.0);
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
  // For tests of training itself (data-parallel equivalence): rank 0's final weights, canonical
  // layout, all parameters one after the other as float32.
  if (const char* dir = std::getenv("DLHOST_DUMP_PARAMS_DIR"); dir != nullptr && world.rank == 0) {
    std::ofstream out(std::string(dir) + "/" + in.id + ".params", std::ios::binary);
    for (int32_t i = 0; i < graph->num_params(); ++i) {
      std::vector<float> values(static_cast<size_t>(graph->param(i).count));
      check_status(api->read_param(m, i, DLHOST_PARAM_VALUE, values.data(), values.size() * 4),
                   "read_param");
      out.write(reinterpret_cast<const char*>(values.data()),
                static_cast<std::streamsize>(values.size() * 4));
    }
  }

  // Across ranks: a step lasts as long as its slowest rank; the loss is the mean of the ranks'
  // (each over its own shard, so the mean is the loss of the global mini-batch).
  std::vector<double> compute_ms(step_ms.size());
  for (size_t i = 0; i < step_ms.size(); ++i) compute_ms[i] = fwd_ms[i] + bwd_ms[i] + upd_ms[i];
  if (dp) {
    for (auto* v : {&step_ms, &fwd_ms, &bwd_ms, &comm_ms, &upd_ms, &allreduce_ms, &compute_ms})
      dp->all_reduce_max(*v);
    dp->all_reduce_sum(losses);
    for (auto& l : losses) l /= world.size;
  }

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
  timing["samples_per_second"] = step.median > 0 ? 1000.0 * global_batch / step.median : 0.0;
  timing["samples_per_second_mean"] = step.mean > 0 ? 1000.0 * global_batch / step.mean : 0.0;
  // Training costs about 3x the forward FLOPs (forward, backward data, backward weights).
  timing["train_gflops_per_second_est"] =
      step.median > 0 ? 3.0 * graph->forward_flops() * world.size / (step.median * 1e6) : 0.0;
  timing["samples"] =
      json{{"step", step_ms}, {"forward", fwd_ms}, {"backward", bwd_ms}, {"update", upd_ms}};
  rec["timing"] = timing;
  if (dp) {
    rec["distributed"] =
        json{{"ranks", world.size},
             {"launcher", world.launcher},
             {"comm", comm->name()},
             {"comm_library", comm->library()},
             {"scaling", weak ? "weak" : "strong"},
             {"global_batch", global_batch},
             {"per_rank_batch", batch},
             {"overlap", get_or<bool>(p, "overlap", true)},
             {"bucket_mb", get_or<double>(p, "bucket_mb", 25.0)},
             {"buckets", dp_stats.buckets},
             {"allreduce_bytes_per_step", dp_stats.bytes},
             {"compute", summary_json(summarize(compute_ms))},
             {"allreduce", summary_json(summarize(allreduce_ms))},
             {"exposed_comm", summary_json(summarize(comm_ms))},
             {"samples",
              {{"compute", compute_ms}, {"allreduce", allreduce_ms}, {"exposed_comm", comm_ms}}}};
  }
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
