// runner.cpp — see runner.h. The timing loop is the paper's method: `warmup` untimed steps, then
// `iterations` timed steps, timed with device events where the backend has them, else with the
// host clock and a synchronize per phase (step_loop.h).
//
// A case runs as a few named steps: resolve (plugins, device, mini-batch), prepare (graph,
// compile, weights and resident data), train (the timed loop, StepLoop), reduce over ranks,
// and the record's parts. Missing case keys take their defaults from the suite schema.
#include "run/runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>

#include "control_plane/control_plane.h"
#include "core/compatibility.h"
#include "core/device.h"
#include "core/environment.h"
#include "core/graph.h"
#include "core/handles.h"
#include "core/host_api.h"
#include "core/number_text.h"
#include "core/plugin_registry.h"
#include "core/stats.h"
#include "data/synthetic.h"
#include "record/blocks.h"
#include "record/record.h"
#include "run/data_feed.h"
#include "run/data_parallel.h"
#include "run/machine_facts.h"
#include "run/matmul_peak.h"
#include "run/owned_loop.h"
#include "run/step_loop.h"
#include "run/tool_runtime.h"
#include "suite/case_params.h"
#include "suite/skip.h"

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

// No sample (a case that timed out before its first timed step): not measured (record/blocks.h).
record::Figures figures_of(const std::vector<double>& samples) {
  const Summary s = summarize(samples);
  return record::Figures{s.count > 0, s.mean, s.median, s.min, s.max, s.p5, s.p95, s.stddev};
}

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
dlhost_options backend_options(const json& params, const CaseParams& keys,
                               const std::string& backend) {
  dlhost_options opts = plugin_options(params, backend);
  opts.values["threads"] = std::to_string(keys.threads);
  opts.values["seed"] = std::to_string(keys.seed);
  add_precision_options(params, opts);
  return opts;
}

// --- resolve: what the case runs on, before anything is built ----------------------------------

struct Plan {
  const NetworkRef* net = nullptr;
  const LoadedPlugin* backend = nullptr;
  int32_t device = 0;
  std::string device_by = "suite";  // or "local_rank"
  const dlhost_device_info* dev = nullptr;
  int64_t batch = 0, global_batch = 0;  // per rank, and over all ranks
  bool weak = false;
};

const LoadedPlugin* usable_plugin(const RunContext& ctx, dlhost_plugin_kind kind, const char* role,
                                  const std::string& name) {
  const LoadedPlugin* plugin = ctx.registry->find(kind, name);
  if (plugin == nullptr) {
    const std::string why = ctx.registry->left_out_reason(name);
    throw Skip{std::string(role) + " '" + name + "' is not " +
               (why.empty() ? "installed here" : "built here: " + why)};
  }
  if (!plugin->usable)
    throw Skip{std::string(role) + " '" + name + "' cannot run here: " + plugin->unusable_reason};
  return plugin;
}

void check_world(const CaseParams& p, const RankEnv& world, const std::string& comm_name) {
  const int64_t ranks = p.ranks;
  if (ranks != world.size)
    throw Skip{"the case asks for " + std::to_string(ranks) + " ranks but runs in a world of " +
               std::to_string(world.size) +
               " (multi-rank cases need the case's own process: drop --no-isolate)"};
  if (ranks > 1 && comm_name == "none")
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                "a case of " + std::to_string(ranks) + " ranks needs a comm (e.g. comm: mpi)");
}

// Strong scaling (the paper's choice) splits a fixed global mini-batch over the ranks; weak
// scaling gives every rank the whole `batch`. Unset, the batch is the network's for the device.
void resolve_batch(const CaseParams& p, const RankEnv& world, Plan& plan) {
  plan.global_batch = p.batch.value_or(0);
  if (plan.global_batch <= 0)
    plan.global_batch =
        plan.dev->kind == DLHOST_DEVICE_GPU ? plan.net->info->gpu_batch : plan.net->info->cpu_batch;
  plan.weak = p.scaling == "weak";
  plan.batch = plan.global_batch;
  if (plan.weak) {
    plan.global_batch = plan.batch * world.size;
  } else if (plan.global_batch % world.size != 0) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                "strong scaling: the global mini-batch " + std::to_string(plan.global_batch) +
                    " does not divide over " + std::to_string(world.size) + " ranks");
  } else {
    plan.batch = plan.global_batch / world.size;
  }
}

Plan resolve(const CaseParams& p, const RunContext& ctx) {
  Plan plan;
  const std::string& network_name = p.network;
  const std::string& backend_name = p.backend;
  const std::string& comm_name = p.comm;
  check_world(p, ctx.rank, comm_name);
  plan.net = find_network(*ctx.networks, network_name);
  if (plan.net == nullptr) throw Skip{"network '" + network_name + "' is not installed here"};
  plan.backend = usable_plugin(ctx, DLHOST_PLUGIN_BACKEND, "backend", backend_name);
  if (is_tool_runtime(comm_name))
    if (auto why = tool_runtime_refusal(*plan.backend, comm_name)) throw Skip{*why};
  const dlhost_backend_api* api = plan.backend->table->backend;
  const int32_t devices = api->device_count();
  // The ranks of a node share its devices round-robin, unless the suite names one.
  if (const std::optional<int64_t>& d = p.device) {
    plan.device = static_cast<int32_t>(*d);
  } else {
    plan.device = devices > 0 ? ctx.rank.local_rank % devices : 0;
    plan.device_by = "local_rank";
    // Ranks sharing a GPU would measure a split device, not the scaling the case names (and
    // NCCL refuses two ranks on one GPU): one GPU per rank of the node. dlhost checked this
    // machine before starting the ranks; ranks on other hosts check their own node here. Every
    // rank of the node sees the same counts, so all skip.
    const BackendDevices gpus = backend_devices(*plan.backend);
    if (gpus.gpu)
      if (std::string why = gpu_shortfall(
              ctx.rank.local_size, std::to_string(ctx.rank.local_size) + " ranks on this node",
              "this node", backend_name, gpus);
          !why.empty())
        throw Skip{why};
  }
  if (plan.device < 0 || plan.device >= devices)
    throw Skip{"backend '" + backend_name + "' has no device " + std::to_string(plan.device) +
               " here (" + std::to_string(devices) + " devices)"};
  check_status(api->device_info(plan.device, &plan.dev), "device_info");
  return plan;
}

record::Backend backend_of(const Plan& plan, bool by_priority) {
  const dlhost_device_info* dev = plan.dev;
  record::Backend b;
  b.name = plan.backend->name;
  b.version = plan.backend->version;
  b.path = plan.backend->path;
  // How the plugin was compiled; absent (null) when it does not say.
  if (!plan.backend->build.empty())
    b.build = record::PluginBuild{plan.backend->build, !plan.backend->unoptimized()};
  b.device = {plan.device,
              plan.device_by,
              dev->name ? dev->name : "",
              dev->model ? dev->model : "",
              dev->cores,
              dev->isa ? dev->isa : "",
              dev->memory_bytes,
              dev->library ? dev->library : ""};
  b.chosen_by = by_priority ? "priority" : "suite";
  return b;
}

// The network's optimizer defaults, overridden per case.
dlhost_optimizer_desc case_optimizer(const CaseParams& p, const NetworkRef& net) {
  // A network plugin older than ABI 1.4 hands a shorter struct: read what it has.
  dlhost_optimizer_desc opt = sdk::whole_optimizer(*net.info->optimizer);
  if (p.optimizer)
    opt.kind = *p.optimizer == "adamw" ? DLHOST_OPTIMIZER_ADAMW : DLHOST_OPTIMIZER_SGD;
  opt.beta1 = p.beta1.value_or(opt.beta1);
  opt.beta2 = p.beta2.value_or(opt.beta2);
  opt.epsilon = p.adam_epsilon.value_or(opt.epsilon);
  opt.learning_rate = p.lr.value_or(opt.learning_rate);
  opt.momentum = p.momentum.value_or(opt.momentum);
  opt.weight_decay = p.weight_decay.value_or(opt.weight_decay);
  opt.clip_norm = p.clip_norm.value_or(opt.clip_norm);
  return opt;
}

// --- prepare: graph, compiled model, weights and resident data ---------------------------------

struct Prepared {
  std::unique_ptr<Graph> graph;
  dlhost_optimizer_desc optimizer{};
  ContextHandle context{nullptr, ContextDeleter{nullptr}};  // declared before the model: the
  ModelHandle model{nullptr, ModelDeleter{nullptr}};        // model goes first
  std::vector<Upload> uploads;  // `input: upload`: the batch in staging memory (before the
                                // context is gone: declared after it)
  double build_ms = 0, compile_ms = 0, init_ms = 0;
  bool fused_step = false;  // the backend was told it may do the whole step in one call (1.4)
  bool fused = false;       // ... and did (1.5's model_info; step_was_fused)
};

// `input: upload`: the batch kept in staging memory (pinned where the backend offers it), from
// which every step copies it to the device again.
void stage_input(const BackendDevice& device, const InputData& input, Prepared& m) {
  Upload u;
  u.tensor = input.tensor;
  u.bytes = input.bytes.size();
  u.memory = std::make_unique<StagingMemory>(device, m.context.get(), u.bytes);
  std::memcpy(u.memory->data(), input.bytes.data(), u.bytes);
  u.device = device.input_buffer(m.model.get(), input.tensor);
  if (u.device && u.device->bytes != u.bytes)
    throw Error(DLHOST_CODE_INTERNAL, device.name() + " input_buffer of tensor " +
                                          std::to_string(input.tensor) + " holds " +
                                          std::to_string(u.device->bytes) + " bytes, the batch " +
                                          std::to_string(u.bytes));
  m.uploads.push_back(std::move(u));
}

void load_weights_and_data(const Plan& plan, const CaseParams& p, int rank, Prepared& m) {
  const dlhost_backend_api* api = plan.backend->table->backend;
  const uint64_t seed = static_cast<uint64_t>(p.seed);
  const Graph& graph = *m.graph;
  // One parameter at a time: the host's copy of all of them on top of the backend's buffers
  // was the case's memory peak (FCN-8: +522 MB; now at most its largest parameter, 219 MB).
  for (int32_t i = 0; i < graph.num_params(); ++i) {
    const std::vector<float> weights = initial_param(graph, seed, i);
    check_status(api->write_param(m.model.get(), i, DLHOST_PARAM_VALUE, weights.data(),
                                  graph.param_bytes(i)),
                 "write_param " + std::string(graph.param(i).name));
  }
  const bool upload = p.input == "upload";
  const BackendDevice device(*plan.backend);
  for (const auto& input : synthetic_inputs(graph, seed, plan.batch * rank)) {
    // Uploaded inputs reach the device only through the steps' uploads.
    if (upload) {
      stage_input(device, input, m);
      continue;
    }
    check_status(
        api->set_input(m.model.get(), input.tensor, input.bytes.data(), input.bytes.size()),
        "set_input " + std::string(graph.tensor(input.tensor).name));
  }
  check_status(api->synchronize(m.model.get()), "synchronize");
}

// `built`: told the graph before the backend sees it (a compile may run out of memory).
Prepared prepare(const Plan& plan, const json& p, const CaseParams& keys, int rank,
                 const std::function<void(const Graph&)>& built) {
  Prepared m;
  auto t = Clock::now();
  dlhost_options net_opts = plugin_options(p, plan.net->plugin->name);
  m.graph = build_network(*plan.net->plugin, plan.net->index, plan.batch, &net_opts);
  m.build_ms = ms_since(t);
  built(*m.graph);
  m.optimizer = case_optimizer(keys, *plan.net);
  dlhost_options opts = backend_options(p, keys, plan.backend->name);
  m.context = create_context(*plan.backend, plan.device, opts);
  // No host code reads the gradient buffers on one rank without comm (DLHOST_DUMP_PARAMS_DIR
  // reads the weights after the last step; conform runs its own loop and never sets this).
  m.fused_step =
      fused_step_allowed(plan.backend->speaks_minor, keys.fused_step, keys.ranks, keys.comm, false);
  if (m.fused_step) opts.values["fused_step"] = "1";
  // The model is built for the backend's own runtime (ABI 1.5, DLHOST_EXT_TOOL_RUNTIME).
  if (is_tool_runtime(keys.comm)) opts.values["tool_runtime"] = keys.comm;
  t = Clock::now();
  m.model = compile_model(*plan.backend, m.context.get(), m.graph->view(), m.optimizer, opts);
  m.compile_ms = ms_since(t);
  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  check_status(plan.backend->table->backend->model_info(m.model.get(), &info), "model_info");
  m.fused = step_was_fused(plan.backend->speaks_minor, m.fused_step, info);
  t = Clock::now();
  load_weights_and_data(plan, keys, rank, m);
  m.init_ms = ms_since(t);
  return m;
}

record::Network network_of(const Plan& plan, const Graph& graph) {
  return record::Network{plan.net->name,
                         plan.net->plugin->name,
                         plan.batch,
                         graph.input_shape(),
                         graph.param_count(),
                         graph.forward_flops_per_sample(),
                         static_cast<double>(graph.tokens_per_sample())};
}

record::Optimizer optimizer_of(const dlhost_optimizer_desc& opt) {
  return record::Optimizer{optimizer_name(opt.kind),  as_written(opt.learning_rate),
                           as_written(opt.momentum),  as_written(opt.weight_decay),
                           as_written(opt.clip_norm), as_written(opt.beta1),
                           as_written(opt.beta2),     as_written(opt.epsilon)};
}

// resolved.departures (ABI 1.5): where the backend says this model is knowingly faster than the
// framework's own users get it; the report marks the figure with them.
record::Resolved resolved_of(const Plan& plan, const CaseParams& p, const Prepared& m) {
  dlhost_model_info info{};
  info.struct_size = DLHOST_MODEL_INFO_STRUCT_SIZE;
  check_status(plan.backend->table->backend->model_info(m.model.get(), &info), "model_info");
  return record::Resolved{plan.batch,
                          plan.global_batch,
                          p.threads,
                          info.threads,
                          p.precision,
                          optimizer_of(m.optimizer),
                          info.implementation ? info.implementation : "",
                          departures_of(plan.backend->speaks_minor, info)};
}

// Across ranks: a step lasts as long as its slowest rank; the loss is the mean of the ranks'
// (each over its own shard, so the mean is the loss of the global mini-batch).
void reduce_over_ranks(Samples& s, DataParallel* dp, int world_size) {
  // A tool that owns its loop (owned_loop.h) splits no phase: no compute either, unless the
  // tool timed it itself (its own, kept).
  const size_t phases = std::min({s.forward.size(), s.backward.size(), s.update.size()});
  if (phases > 0 || s.compute.size() != s.step.size()) {
    s.compute.resize(std::min(s.step.size(), phases));
    for (size_t i = 0; i < s.compute.size(); ++i)
      s.compute[i] = s.forward[i] + s.backward[i] + s.update[i];
  }
  if (!dp) return;
  for (auto* v : {&s.step, &s.forward, &s.backward, &s.exposed_comm, &s.update, &s.allreduce,
                  &s.compute, &s.upload, &s.wall_step, &s.data})
    dp->all_reduce_max(*v);
  dp->all_reduce_sum(s.loss);
  for (auto& l : s.loss) l /= world_size;
}

// A test hook, not an option (docs/distributed.md, "Correctness"): for tests of training itself
// (data-parallel equivalence), rank 0's final weights, canonical layout, all parameters one after
// the other as float32, into $DLHOST_DUMP_PARAMS_DIR/<case id>.params.
void dump_params(const std::string& case_id, const dlhost_backend_api* api, dlhost_model* m,
                 const Graph& graph) {
  const char* dir = std::getenv("DLHOST_DUMP_PARAMS_DIR");
  if (dir == nullptr) return;
  const std::string path = std::string(dir) + "/" + case_id + ".params";
  std::ofstream out(path, std::ios::binary);
  for (int32_t i = 0; i < graph.num_params(); ++i) {
    std::vector<float> values(static_cast<size_t>(graph.param(i).count));
    check_status(api->read_param(m, i, DLHOST_PARAM_VALUE, values.data(), graph.param_bytes(i)),
                 "read_param");
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * 4));
  }
  out.close();
  // Said, not thrown: rank 0 leaving here would leave the other ranks waiting in the reductions.
  if (!out) spdlog::error("DLHOST_DUMP_PARAMS_DIR: cannot write {}", path);
}

// --- the record's parts ------------------------------------------------------------------------

record::Timing timing_of(const Samples& s, const CaseParams& p, const Prepared& m, const Plan& plan,
                         int world_size, const char* timer, const DataFeed* feed) {
  const Summary step = summarize(s.step);
  const bool upload = !m.uploads.empty() || feed != nullptr;
  record::Timing t;
  t.timer = timer;
  t.input = feed ? "data" : upload ? "upload" : "resident";
  if (feed) {
    t.upload_pinned = feed->pinned();
    t.upload_via = feed->upload_via();
  } else if (upload) {
    t.upload_pinned = m.uploads.front().memory->pinned();
    t.upload_via = m.uploads.front().device ? "copy_from_host" : "set_input";
  }
  t.warmup = p.warmup;
  t.iterations = static_cast<int64_t>(s.step.size());
  t.build_ms = m.build_ms;
  t.compile_ms = m.compile_ms;
  t.init_ms = m.init_ms;
  // Fused: the backend did the step's work otherwise than the three calls say (it reported so,
  // ABI 1.5; a plugin before 1.5 whenever it was allowed).
  t.fused_step = m.fused;
  t.step = figures_of(s.step);
  t.forward = figures_of(s.forward);
  t.backward = figures_of(s.backward);
  t.update = figures_of(s.update);
  if (upload) t.upload = figures_of(s.upload);
  if (feed) t.data = figures_of(s.data);
  // The host clock around each whole step, its one synchronize included: what the step cost
  // the host, whichever timer split it.
  t.wall_step = figures_of(s.wall_step);
  auto rate = [&](double per_ms, double ms) {
    return ms > 0 ? std::optional<double>(per_ms / ms) : std::nullopt;
  };
  t.samples_per_second = rate(1000.0 * plan.global_batch, step.median);
  t.samples_per_second_mean = rate(1000.0 * plan.global_batch, step.mean);
  // Language models: samples/s x tokens per sample (the data input's sequence length).
  if (int64_t tokens = m.graph->tokens_per_sample(); tokens > 0) {
    t.has_tokens = true;
    t.tokens_per_second = rate(1000.0 * plan.global_batch * tokens, step.median);
  }
  // Training costs about 3x the forward FLOPs (forward, backward data, backward weights).
  t.train_gflops_per_second_est =
      rate(3.0 * m.graph->forward_flops() * world_size / 1e6, step.median);
  t.samples = {s.step, s.forward, s.backward, s.update, s.wall_step, std::nullopt, std::nullopt};
  if (upload) t.samples.upload = s.upload;
  if (feed) t.samples.data = s.data;
  return t;
}

// When each gradient became ready in backward (host clock; `dlhost project` reads it): per
// parameter in the order backward reported them, the bytes of its gradient buffer (what an
// all-reduce moves: a backend's blocked layout may pad it) and the median over timed steps of
// its time from the start of backward. Null when the backend reported none or the timer is the
// device's (the host clock at a callback says nothing about device work then).
json backward_profile_json(const Samples& s, const Graph& graph, const dlhost_backend_api* api,
                           dlhost_model* model, const char* timer) {
  if (s.grad_order.empty() || std::string(timer) != "host_clock") return json();
  json gradients = json::array();
  for (size_t k = 0; k < s.grad_order.size(); ++k) {
    int32_t id = s.grad_order[k];
    const dlhost_param_desc& d = graph.param(id);
    gradients.push_back(json{{"param", id},
                             {"name", d.name ? d.name : ""},
                             {"bytes", param_buffer(api, model, id, true).bytes},
                             {"ready_ms", summarize(s.grad_ready_ms[k]).median}});
  }
  return json{{"source", "grad_ready on the host clock, ms from the start of backward"},
              {"backward_ms", summarize(s.backward).median},
              {"gradients", gradients}};
}

// --- data parallelism: the comm on the model's stream, a control plane, the all-reduce
// ------------

// Declared after the Prepared model it serves, so it goes first: the comm may hold the model's
// stream, and the gradient arenas live in the model's context.
struct Distributed {
  std::unique_ptr<CommSession> comm;
  std::unique_ptr<ControlPlane> control;
  std::unique_ptr<DataParallel> dp;
  const dlhost_backend_api* api = nullptr;
  dlhost_model* model = nullptr;
  bool on_stream = false;
  std::vector<int64_t> devices;  // every rank's device index

  Distributed() = default;
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;
  ~Distributed() {
    // Collectives still queued on the stream refer to the comm: let them run out first.
    if (on_stream) StatusPtr(api->synchronize(model));
  }
};

// The comm of the case, handed the model's stream when the backend exports one (ABI 1.2), so a
// device comm orders its collectives on it.
void start_comm(const json& p, const CaseParams& keys, const RunContext& ctx, const Plan& plan,
                const BackendDevice& device, dlhost_model* model, Distributed& d) {
  const std::string& name = keys.comm;
  const LoadedPlugin& plugin = *usable_plugin(ctx, DLHOST_PLUGIN_COMM, "comm", name);
  dlhost_comm_stream_ext ext{};
  CommDevice where;
  where.device = plan.device;
  if (auto stream = device.stream(model)) {
    ext.struct_size = DLHOST_COMM_STREAM_EXT_STRUCT_SIZE;
    ext.type = DLHOST_EXT_COMM_STREAM;
    ext.stream = *stream;
    where.extensions = reinterpret_cast<const dlhost_extension*>(&ext);
  }
  d.comm = std::make_unique<CommSession>(plugin, ctx.rank, plugin_options(p, name), where);
  d.api = device.api();
  d.model = model;
  d.on_stream = where.extensions != nullptr;
}

void start_data_parallel(const json& p, const CaseParams& keys, const RunContext& ctx,
                         const Plan& plan, const BackendDevice& device, Prepared& m,
                         Distributed& d) {
  start_comm(p, keys, ctx, plan, device, m.model.get(), d);
  const RankEnv& world = ctx.rank;
  // A comm on device memory only cannot carry the host's own figures: the store does.
  d.control = d.comm->caps().host_memory
                  ? comm_control_plane(*d.comm)
                  : store_control_plane(world.rank, world.size, "dlhost/control/run/");
  DataParallelTarget target{d.comm.get(),
                            d.on_stream,
                            &device,
                            m.context.get(),
                            m.model.get(),
                            m.graph->num_params(),
                            gradient_memory_from(keys.comm_memory)};
  d.dp = std::make_unique<DataParallel>(target, *d.control, keys.bucket_mb, keys.overlap);
  if (ctx.on_stage) ctx.on_stage("weights");
  d.dp->broadcast_parameters();
  int64_t mine = plan.device;
  d.devices.assign(static_cast<size_t>(world.size), 0);
  d.control->all_gather(&mine, d.devices.data(), 1, DLHOST_DTYPE_I64);
  d.dp->barrier();
}

// What every data-parallel case says: its world, scaling and compute time.
record::Distributed distributed_base(const Samples& s, const Plan& plan, const RankEnv& world) {
  record::Distributed d;
  d.ranks = world.size;
  d.launcher = world.launcher;
  d.scaling = plan.weak ? "weak" : "strong";
  d.global_batch = plan.global_batch;
  d.per_rank_batch = plan.batch;
  d.compute = figures_of(s.compute);
  d.compute_samples = s.compute;
  return d;
}

record::Distributed distributed_of(const Samples& s, const CaseParams& p, const Plan& plan,
                                   const RankEnv& world, const Distributed& d) {
  const CommSession& comm = *d.comm;
  record::Distributed out = distributed_base(s, plan, world);
  out.comm = comm.name();
  out.host = record::HostComm{comm.library(),
                              d.on_stream,
                              gradient_path_name(d.dp->path()),
                              d.control->kind(),
                              d.devices,
                              p.overlap,
                              p.bucket_mb,
                              static_cast<int64_t>(s.dp.buckets),
                              static_cast<int64_t>(s.dp.bytes)};
  out.allreduce = figures_of(s.allreduce);
  out.allreduce_samples = s.allreduce;
  out.exposed_comm = figures_of(s.exposed_comm);
  out.exposed_comm_samples = s.exposed_comm;
  return out;
}

// A tool runtime's case: no host comm, buckets or gradient path; its communication time is the
// runtime's own where it exposes one, else absent with the reason (never 0).
record::Distributed tool_runtime_of(const Samples& s, const Plan& plan, const RankEnv& world,
                                    const ToolRuntime& tool) {
  record::Distributed out = distributed_base(s, plan, world);
  out.tool = tool.describe();
  out.comm = out.tool->runtime;
  if (tool.has_comm_time()) {
    out.allreduce = figures_of(s.allreduce);
    out.allreduce_samples = s.allreduce;
  }
  return out;
}

// Peak over the run: the largest the backend reported after any step, not what it holds now.
record::Memory memory_of(const MemoryFigures& mem, uint64_t backend_bytes) {
  record::Memory out;
  out.peak_rss_bytes = peak_rss_bytes();
  out.backend_bytes = backend_bytes;
  out.backend_peak_bytes = mem.peak;
  out.source = mem.device ? "device_memory_ext" : "memory_in_use";
  if (mem.device)
    out.device = record::DeviceMemory{mem.device->in_use_bytes, mem.device->peak_bytes,
                                      mem.device->free_bytes, mem.device->total_bytes};
  return out;
}

record::Loss loss_of(const Samples& s) {
  auto first = [](const std::vector<double>& v) {
    return v.empty() ? std::nullopt : std::optional<double>(v.front());
  };
  return record::Loss{first(s.warmup_loss), first(s.loss),
                      s.loss.empty() ? std::nullopt : std::optional<double>(s.loss.back()), s.loss};
}

// When the case's time ends; a timeout beyond any run (1e300 s) never ends it.
Clock::time_point case_deadline(Clock::time_point start, double timeout_s) {
  constexpr double kYear = 365.0 * 24 * 3600;
  if (!(timeout_s < kYear)) return Clock::time_point::max();
  return start +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
}

void finish_status(const Samples& s, const CaseParams& p, json& rec) {
  if (s.timed_out) {
    rec["status"] = kStatusTimeout;
    char why[200];
    std::snprintf(why, sizeof(why),
                  "case exceeded its timeout of %g s after %zu of %lld timed "
                  "iterations",
                  p.timeout, s.step.size(), static_cast<long long>(p.iterations));
    rec["reason"] = why;
  } else if (s.step.empty()) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, "no timed iterations");
  }
}

// --- real data ---------------------------------------------------------------------------------

// With `epochs`, the whole epochs are the run: warm-up steps first, the rest timed.
int64_t timed_steps(const CaseParams& p, const DataFeed& feed) {
  const int64_t total = feed.total_steps(), warmup = p.warmup;
  if (total < 0) return p.iterations;
  if (total <= warmup)
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, std::to_string(p.epochs) + " epoch(s) of " +
                                                  std::to_string(total) +
                                                  " steps leave no timed step after " +
                                                  std::to_string(warmup) + " warm-up steps");
  return total - warmup;
}

// The test-split evaluation; a failure there is recorded in its block and keeps the timing.
json evaluation(DataFeed& feed, DataParallel* dp) {
  try {
    json e = feed.evaluate(dp);
    e["status"] = kStatusOk;
    return e;
  } catch (const Error& e) {
    const bool unimplemented = e.code() == DLHOST_CODE_UNIMPLEMENTED;
    return json{{"status", unimplemented ? kStatusSkipped : kStatusFailed},
                {"reason", std::string(code_name(e.code())) + ": " + e.what()}};
  } catch (const std::exception& e) {
    return json{{"status", kStatusFailed}, {"reason", e.what()}};
  }
}

// The case's comm: a tool's own runtime (tool_runtime.h), returned, or dlhost's data parallelism,
// into `d`; nothing for comm "none".
std::unique_ptr<ToolRuntime> start_case_comm(const json& p, const CaseParams& keys,
                                             const RunContext& ctx, const Plan& plan,
                                             const BackendDevice& device, Prepared& m,
                                             Distributed& d) {
  const std::string& comm = keys.comm;
  if (comm == "none") return nullptr;
  if (ctx.on_stage) ctx.on_stage("comm");
  std::unique_ptr<ToolRuntime> tool;
  if (is_tool_runtime(comm)) {
    dlhost_options runtime_options = backend_options(p, keys, plan.backend->name);
    if (takes_bucket_mb(comm)) runtime_options.values["bucket_mb"] = fmt("%.17g", keys.bucket_mb);
    tool = std::make_unique<ToolRuntime>(*plan.backend, m.model.get(), ctx.rank, comm,
                                         runtime_options, keys.startup_timeout,
                                         RuntimeJob{ctx.runtime_cluster, &m.optimizer});
  } else {
    start_data_parallel(p, keys, ctx, plan, device, m, d);
  }
  if (ctx.on_stage) ctx.on_stage("ready");
  return tool;
}

// --- the case, step by step ---------------------------------------------------------------------

// The case's keys typed (suite/case_params.h); a key of the wrong type fails the case naming it
// and the suite line the case came from.
CaseParams typed_keys(const CaseSpec& in) {
  try {
    return case_params(in.params, in.source);
  } catch (const CaseParamError& e) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, e.what());
  }
}

void run_body(const CaseSpec& in, const RunContext& ctx, json& rec, TensorNeed& need) {
  const json& p = in.params;
  if (!in.skip_reason.empty()) throw Skip{in.skip_reason};
  CaseParams keys = typed_keys(in);
  const RankEnv& world = ctx.rank;
  Plan plan = resolve(keys, ctx);
  rec["backend"] = record::to_json(backend_of(plan, in.backend_by_priority));
  resolve_batch(keys, world, plan);
  auto case_start = Clock::now();

  const BackendDevice device(*plan.backend);
  Prepared m = prepare(plan, p, keys, world.rank, [&](const Graph& graph) {
    need = largest_tensor(*graph.view(), least_element_bytes(keys.precision));
    if (ctx.on_need) ctx.on_need(need);
  });
  rec["network"] = record::to_json(network_of(plan, *m.graph));
  rec["resolved"] = record::to_json(resolved_of(plan, keys, m));

  // Data parallelism: the same weights everywhere, gradients averaged every step. The comm
  // starts after compile: a device comm needs the model's stream.
  Distributed d;
  std::unique_ptr<ToolRuntime> tool = start_case_comm(p, keys, ctx, plan, device, m, d);
  DataParallel* dp = d.dp.get();

  // Real data: mini-batches from the input pipeline; `epochs` sets the number of steps.
  std::unique_ptr<DataFeed> feed;
  if (uses_real_data(keys)) {
    feed = std::make_unique<DataFeed>(keys, *m.graph, device, m.context.get(), m.model.get(),
                                      plan.batch, world);
    keys.iterations = timed_steps(keys, *feed);
  }

  const dlhost_backend_api* api = device.api();
  StepLoop loop(device, m.context.get(), m.model.get(), dp, m.uploads, ctx, feed.get());
  // A tool that owns its loop trains a case without a host comm in one call (owned_loop.h),
  // also under its own runtime (bigdl_spark: DistriOptimizer's loop).
  std::optional<OwnedLoop> owned;
  if (const dlhost_step_loop_ext* ext = dp ? nullptr : find_step_loop(*plan.backend))
    owned.emplace(*ext);
  Samples s = owned ? owned->train(loop, m.model.get(), keys, case_start)
                    : train(loop, dp, keys, case_start);
  uint64_t backend_bytes = 0;
  check_status(api->memory_in_use(m.model.get(), &backend_bytes), "memory_in_use");
  if (world.rank == 0) dump_params(in.id, api, m.model.get(), *m.graph);
  reduce_over_ranks(s, dp, world.size);
  if (tool) tool->reduce(s);

  record::Timing timing =
      timing_of(s, keys, m, plan, world.size, owned ? OwnedLoop::kTimer : loop.timer(), feed.get());
  if (owned) timing.owned_loop = owned->describe();
  rec["timing"] = record::to_json(timing);
  // After the timed steps, so it cannot disturb them; every rank measures its own device, in
  // what is left of the case's time.
  if (int64_t size = keys.matmul_peak; size > 0 && !s.timed_out)
    rec["matmul_peak"] = measure_matmul_peak(*plan.backend, plan.device,
                                             backend_options(p, keys, plan.backend->name), size, 3,
                                             10, case_deadline(case_start, keys.timeout));
  // Not under the fused step: the backend may then do backward's work in another call and skip
  // some or all grad_ready callbacks, and the profile must be the split step's, which data
  // parallelism runs (a partial one would project too few gradient bytes).
  if (json profile =
          m.fused ? json() : backward_profile_json(s, *m.graph, api, m.model.get(), loop.timer());
      !profile.is_null())
    rec["backward_profile"] = profile;
  if (dp) rec["distributed"] = record::to_json(distributed_of(s, keys, plan, world, d));
  if (tool) rec["distributed"] = record::to_json(tool_runtime_of(s, plan, world, *tool));
  rec["loss"] = record::to_json(loss_of(s));
  rec["memory"] = record::to_json(memory_of(s.memory, backend_bytes));
  if (feed) {
    rec["data"] = feed->describe();
    if (keys.evaluate && !s.timed_out) rec["evaluation"] = evaluation(*feed, dp);
  }
  finish_status(s, keys, rec);
  if (d.comm) d.comm->goodbye();  // only on this clean path (a failure leaves at once)
}

// Under a data limit (memory_limit_mb): an OOM says the limit and, where it is over it, the
// largest tensor; a failure whose network's largest tensor alone is over the limit ran out of
// memory, whatever words the backend's allocator chose for it (a refused option is not one).
void apply_memory_limit(const TensorNeed& need, uint64_t limit, json& rec) {
  const std::string status = rec["status"].get<std::string>();
  const std::string reason = rec["reason"].get<std::string>();
  const std::string over = over_limit_text(need, limit);
  if (status == kStatusOom) {
    rec["reason"] = reason + " (" + (over.empty() ? under_limit_text(limit) : over) + ")";
  } else if (status == kStatusFailed && !over.empty() &&
             reason.rfind(code_name(DLHOST_CODE_INVALID_ARGUMENT), 0) != 0) {
    rec["status"] = kStatusOom;
    rec["reason"] = std::string(code_name(DLHOST_CODE_RESOURCE_EXHAUSTED)) + ": " + over +
                    "; the backend said: " + reason;
  }
}

}  // namespace

nlohmann::ordered_json run_case(const CaseSpec& input, const RunContext& ctx) {
  json rec = record::start(
      {input.id, kStatusOk, "", ctx.suite_name, ctx.suite_path, input.source, utc_now()},
      input.params);
  auto start = Clock::now();
  reset_peak_rss();
  TensorNeed need;
  try {
    run_body(input, ctx, rec, need);
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
  if (const uint64_t limit = data_limit_bytes(); limit > 0) apply_memory_limit(need, limit, rec);
  record::finish(rec, ms_since(start) / 1000.0, ctx.environment);
  return rec;
}

std::optional<std::string> network_options_error(const std::vector<NetworkRef>& networks,
                                                 const json& params) {
  const std::string network_name = case_params(params).network;
  const NetworkRef* net = network_name.empty() ? nullptr : find_network(networks, network_name);
  if (net == nullptr) return std::nullopt;
  auto options = params.find("options");
  if (options == params.end() || !options->is_object() || !options->contains(net->plugin->name))
    return std::nullopt;  // the network's own defaults: its run says if they do not build
  try {
    dlhost_options net_opts = plugin_options(params, net->plugin->name);
    build_network(*net->plugin, net->index, 1, &net_opts);
  } catch (const Error& e) {
    if (e.code() == DLHOST_CODE_INVALID_ARGUMENT) return std::string(e.what());
  } catch (const std::exception&) {
  }
  return std::nullopt;  // anything else is the run's to report
}

void serve_runtime_role(const CaseSpec& in, const RunContext& ctx, int32_t role, int index) {
  const json& p = in.params;
  const CaseParams keys = case_params(p, in.source);
  const NetworkRef* net = find_network(*ctx.networks, keys.network);
  if (net == nullptr)
    throw Error(DLHOST_CODE_NOT_FOUND, "network '" + keys.network + "' is not installed here");
  const LoadedPlugin* backend = nullptr;
  try {
    backend = usable_plugin(ctx, DLHOST_PLUGIN_BACKEND, "backend", keys.backend);
  } catch (const Skip& s) {
    throw Error(DLHOST_CODE_NOT_FOUND, s.reason);
  }
  const dlhost_optimizer_desc optimizer = case_optimizer(keys, *net);
  serve_tool_runtime_role(*backend, keys.comm, role, index, static_cast<int>(keys.ranks),
                          RuntimeJob{ctx.runtime_cluster, &optimizer},
                          backend_options(p, keys, backend->name), keys.startup_timeout);
}

std::vector<RuntimeRoleCount> case_runtime_role_counts(const json& p, const RunContext& ctx) {
  const CaseParams keys = case_params(p);
  if (keys.comm.empty() || keys.backend.empty() || !is_tool_runtime(keys.comm)) return {};
  const LoadedPlugin* backend = ctx.registry->find(DLHOST_PLUGIN_BACKEND, keys.backend);
  if (backend == nullptr || !backend->usable || tool_runtime_refusal(*backend, keys.comm))
    return {};
  return tool_runtime_roles(*backend, keys.comm, static_cast<int>(keys.ranks),
                            backend_options(p, keys, backend->name));
}

std::string capability_skip_reason(const PluginRegistry& registry,
                                   const std::vector<NetworkRef>& networks, const json& params) {
  const CaseParams keys = case_params(params);
  if (keys.backend.empty() || keys.network.empty()) return "";
  const LoadedPlugin* backend = registry.find(DLHOST_PLUGIN_BACKEND, keys.backend);
  const NetworkRef* net = find_network(networks, keys.network);
  if (backend == nullptr || net == nullptr || !backend->usable) return "";
  if (auto why = precision_gap(*backend, keys.precision)) return *why;
  if (is_tool_runtime(keys.comm))
    if (auto why = tool_runtime_refusal(*backend, keys.comm)) return *why;
  try {
    dlhost_options net_opts = plugin_options(params, net->plugin->name);
    std::unique_ptr<Graph> graph = build_network(*net->plugin, net->index, 1, &net_opts);
    if (auto why = abi_gap(*backend, *graph->view())) return *why;
    if (auto why = ops_gap(*backend, *graph->view())) return *why;
  } catch (const std::exception&) {
    return "";  // the case's own run reports a network that does not build
  }
  return "";
}

}  // namespace dlhost
