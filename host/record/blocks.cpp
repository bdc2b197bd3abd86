// blocks.cpp — see blocks.h. Each block's writer and reader sit together: a field added or
// renamed is changed in both at once, and test_record's round trip of every field catches one
// side alone.
#include "record/blocks.h"

#include <cmath>

namespace dlhost::record {

using ordered_json = nlohmann::ordered_json;

namespace {

// --- lenient field reads (a record comes from anyone) ----------------------------------------

template <class Json>
const Json* member(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

template <class Json>
std::optional<double> maybe_number(const Json& j, const char* key) {
  const Json* v = member(j, key);
  if (v == nullptr || !v->is_number()) return std::nullopt;
  return v->template get<double>();
}

template <class Json>
double number(const Json& j, const char* key) {
  return maybe_number(j, key).value_or(0.0);
}

// As record::integer_at: an integer as it is, a float in range cut to one, else the fallback.
template <class Json>
int64_t integer(const Json& j, const char* key, int64_t fallback = 0) {
  const Json* v = member(j, key);
  if (v == nullptr || !v->is_number()) return fallback;
  if (v->is_number_integer()) return v->template get<int64_t>();
  const double d = v->template get<double>();
  return std::isfinite(d) && std::abs(d) < 9.2e18 ? static_cast<int64_t>(d) : fallback;
}

template <class Json>
uint64_t bytes(const Json& j, const char* key) {
  const Json* v = member(j, key);
  if (v != nullptr && v->is_number_unsigned()) return v->template get<uint64_t>();
  const int64_t i = integer(j, key);
  return i > 0 ? static_cast<uint64_t>(i) : 0;
}

// As record::text_at: a string as it is, another value as its JSON, absent or null "".
template <class Json>
std::string text(const Json& j, const char* key) {
  const Json* v = member(j, key);
  if (v == nullptr || v->is_null()) return "";
  return v->is_string() ? v->template get<std::string>() : v->dump();
}

template <class Json>
bool flag(const Json& j, const char* key, bool fallback = false) {
  const Json* v = member(j, key);
  return v != nullptr && v->is_boolean() ? v->template get<bool>() : fallback;
}

template <class Json>
std::vector<double> numbers(const Json& j, const char* key) {
  std::vector<double> out;
  const Json* v = member(j, key);
  if (v != nullptr && v->is_array())
    for (const auto& x : *v)
      if (x.is_number()) out.push_back(x.template get<double>());
  return out;
}

template <class Json>
const Json* object(const Json& j, const char* key) {
  const Json* v = member(j, key);
  return v != nullptr && v->is_object() ? v : nullptr;
}

// A count held as a double: the integer it is where it is one (as the runner's int64 wrote it).
ordered_json count_json(double v) {
  if (v == std::floor(v) && std::abs(v) < 9.2e18) return ordered_json(static_cast<int64_t>(v));
  return ordered_json(v);
}

ordered_json number_or_null(const std::optional<double>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

template <class Json>
std::optional<Figures> maybe_figures(const Json& block, const char* key) {
  const Json* f = object(block, key);
  if (f == nullptr) return std::nullopt;
  return read_figures(*f);
}

}  // namespace

template <class Json>
const Json* block_of(const Json& record, const char* key) {
  return object(record, key);
}

// --- Figures ---------------------------------------------------------------------------------

ordered_json to_json(const Figures& f) {
  if (!f.measured)
    return ordered_json{{"mean", nullptr},  {"median", nullptr}, {"min", nullptr},
                        {"max", nullptr},   {"p5", nullptr},     {"p95", nullptr},
                        {"stddev", nullptr}};
  return ordered_json{{"mean", f.mean}, {"median", f.median}, {"min", f.min},      {"max", f.max},
                      {"p5", f.p5},     {"p95", f.p95},       {"stddev", f.stddev}};
}

template <class Json>
Figures read_figures(const Json& f) {
  Figures out;
  out.measured = maybe_number(f, "median").has_value();
  out.mean = number(f, "mean");
  out.median = number(f, "median");
  out.min = number(f, "min");
  out.max = number(f, "max");
  out.p5 = number(f, "p5");
  out.p95 = number(f, "p95");
  out.stddev = number(f, "stddev");
  return out;
}

// --- backend ---------------------------------------------------------------------------------

ordered_json to_json(const Backend& b) {
  const Device& d = b.device;
  ordered_json build = nullptr;
  if (b.build) build = ordered_json{{"text", b.build->text}, {"optimized", b.build->optimized}};
  return ordered_json{{"name", b.name},
                      {"version", b.version},
                      {"path", b.path},
                      {"build", build},
                      {"device",
                       {{"index", d.index},
                        {"selected_by", d.selected_by},
                        {"name", d.name},
                        {"model", d.model},
                        {"cores", d.cores},
                        {"isa", d.isa},
                        {"memory_bytes", d.memory_bytes},
                        {"library", d.library}}},
                      {"chosen_by", b.chosen_by}};
}

template <class Json>
std::optional<Backend> read_backend(const Json& record) {
  const Json* b = object(record, "backend");
  if (b == nullptr) return std::nullopt;
  Backend out;
  out.name = text(*b, "name");
  out.version = text(*b, "version");
  out.path = text(*b, "path");
  if (const Json* build = object(*b, "build"))
    out.build = PluginBuild{text(*build, "text"), flag(*build, "optimized", true)};
  if (const Json* d = object(*b, "device")) {
    out.device.index = static_cast<int32_t>(integer(*d, "index"));
    out.device.selected_by = text(*d, "selected_by");
    out.device.name = text(*d, "name");
    out.device.model = text(*d, "model");
    out.device.cores = static_cast<int32_t>(integer(*d, "cores"));
    out.device.isa = text(*d, "isa");
    out.device.memory_bytes = bytes(*d, "memory_bytes");
    out.device.library = text(*d, "library");
  }
  out.chosen_by = text(*b, "chosen_by");
  return out;
}

// --- network ---------------------------------------------------------------------------------

ordered_json to_json(const Network& n) {
  ordered_json j{{"name", n.name},     {"plugin", n.plugin},
                 {"batch", n.batch},   {"input_shape", n.input_shape},
                 {"params", n.params}, {"forward_flops_per_sample", n.forward_flops_per_sample}};
  // Language models only: a network whose data input is not token ids has no tokens.
  if (n.tokens_per_sample > 0) j["tokens_per_sample"] = count_json(n.tokens_per_sample);
  return j;
}

template <class Json>
std::optional<Network> read_network(const Json& record) {
  const Json* n = object(record, "network");
  if (n == nullptr) return std::nullopt;
  Network out;
  out.name = text(*n, "name");
  out.plugin = text(*n, "plugin");
  out.batch = integer(*n, "batch");
  out.input_shape = text(*n, "input_shape");
  out.params = integer(*n, "params");
  out.forward_flops_per_sample = number(*n, "forward_flops_per_sample");
  out.tokens_per_sample = number(*n, "tokens_per_sample");
  return out;
}

// --- resolved --------------------------------------------------------------------------------

ordered_json to_json(const Optimizer& o) {
  ordered_json j{{"kind", o.kind},
                 {"lr", o.lr},
                 {"momentum", o.momentum},
                 {"weight_decay", o.weight_decay},
                 {"clip_norm", o.clip_norm}};
  if (o.kind == "adamw") {
    j["beta1"] = o.beta1;
    j["beta2"] = o.beta2;
    j["epsilon"] = o.epsilon;
  }
  return j;
}

ordered_json to_json(const Resolved& r) {
  ordered_json j{{"batch", r.batch},
                 {"global_batch", r.global_batch},
                 {"threads_requested", r.threads_requested},
                 {"threads_used", r.threads_used},
                 {"precision", r.precision},
                 {"optimizer", to_json(r.optimizer)},
                 {"implementation", r.implementation}};
  // Where the backend says this model is knowingly faster than the framework's own users get
  // it (ABI 1.5); absent when none.
  if (!r.departures.empty()) j["departures"] = r.departures;
  return j;
}

template <class Json>
std::optional<Resolved> read_resolved(const Json& record) {
  const Json* r = object(record, "resolved");
  if (r == nullptr) return std::nullopt;
  Resolved out;
  out.batch = integer(*r, "batch");
  out.global_batch = integer(*r, "global_batch");
  out.threads_requested = integer(*r, "threads_requested");
  out.threads_used = static_cast<int32_t>(integer(*r, "threads_used"));
  out.precision = text(*r, "precision");
  if (const Json* o = object(*r, "optimizer")) {
    out.optimizer.kind = text(*o, "kind");
    out.optimizer.lr = number(*o, "lr");
    out.optimizer.momentum = number(*o, "momentum");
    out.optimizer.weight_decay = number(*o, "weight_decay");
    out.optimizer.clip_norm = number(*o, "clip_norm");
    out.optimizer.beta1 = number(*o, "beta1");
    out.optimizer.beta2 = number(*o, "beta2");
    out.optimizer.epsilon = number(*o, "epsilon");
  }
  out.implementation = text(*r, "implementation");
  if (const Json* d = member(*r, "departures"); d != nullptr && d->is_array())
    for (const auto& x : *d)
      if (x.is_string()) out.departures.push_back(x.template get<std::string>());
  return out;
}

// --- timing ----------------------------------------------------------------------------------

ordered_json to_json(const Timing& t) {
  ordered_json j;
  j["unit"] = "ms";
  j["timer"] = t.timer;
  j["input"] = t.input;
  if (t.upload_pinned) {
    j["upload_pinned"] = *t.upload_pinned;
    j["upload_via"] = t.upload_via;
  }
  j["warmup"] = t.warmup;
  j["iterations"] = t.iterations;
  j["build_ms"] = t.build_ms;
  j["compile_ms"] = t.compile_ms;
  j["init_ms"] = t.init_ms;
  // Fused: the backend did the step's work otherwise than the three calls say, so forward,
  // backward and update are not a breakdown of the step.
  j["fused_step"] = t.fused_step;
  j["step"] = to_json(t.step);
  j["forward"] = to_json(t.forward);
  j["backward"] = to_json(t.backward);
  j["update"] = to_json(t.update);
  if (t.upload) j["upload"] = to_json(*t.upload);
  // Real data: the step's wait for its mini-batch from the input pipeline (inside `step`).
  if (t.data) j["data"] = to_json(*t.data);
  j["wall_step"] = to_json(t.wall_step);
  j["samples_per_second"] = number_or_null(t.samples_per_second);
  j["samples_per_second_mean"] = number_or_null(t.samples_per_second_mean);
  if (t.has_tokens) j["tokens_per_second"] = number_or_null(t.tokens_per_second);
  j["train_gflops_per_second_est"] = number_or_null(t.train_gflops_per_second_est);
  const TimingSamples& s = t.samples;
  j["samples"] = ordered_json{{"step", s.step},
                              {"forward", s.forward},
                              {"backward", s.backward},
                              {"update", s.update},
                              {"wall_step", s.wall_step}};
  if (s.upload) j["samples"]["upload"] = *s.upload;
  if (s.data) j["samples"]["data"] = *s.data;
  return j;
}

template <class Json>
std::optional<Timing> read_timing(const Json& record, bool with_samples) {
  const Json* t = object(record, "timing");
  if (t == nullptr) return std::nullopt;
  Timing out;
  out.timer = text(*t, "timer");
  out.input = text(*t, "input");
  if (const Json* p = member(*t, "upload_pinned"); p != nullptr && p->is_boolean())
    out.upload_pinned = p->template get<bool>();
  out.upload_via = text(*t, "upload_via");
  out.warmup = integer(*t, "warmup");
  out.iterations = integer(*t, "iterations");
  out.build_ms = number(*t, "build_ms");
  out.compile_ms = number(*t, "compile_ms");
  out.init_ms = number(*t, "init_ms");
  out.fused_step = flag(*t, "fused_step");
  out.step = maybe_figures(*t, "step").value_or(Figures{});
  out.forward = maybe_figures(*t, "forward").value_or(Figures{});
  out.backward = maybe_figures(*t, "backward").value_or(Figures{});
  out.update = maybe_figures(*t, "update").value_or(Figures{});
  out.upload = maybe_figures(*t, "upload");
  out.data = maybe_figures(*t, "data");
  out.wall_step = maybe_figures(*t, "wall_step").value_or(Figures{});
  out.samples_per_second = maybe_number(*t, "samples_per_second");
  out.samples_per_second_mean = maybe_number(*t, "samples_per_second_mean");
  out.has_tokens = member(*t, "tokens_per_second") != nullptr;
  out.tokens_per_second = maybe_number(*t, "tokens_per_second");
  out.train_gflops_per_second_est = maybe_number(*t, "train_gflops_per_second_est");
  if (const Json* s = object(*t, "samples"); s != nullptr && with_samples) {
    TimingSamples& o = out.samples;
    o.step = numbers(*s, "step");
    o.forward = numbers(*s, "forward");
    o.backward = numbers(*s, "backward");
    o.update = numbers(*s, "update");
    o.wall_step = numbers(*s, "wall_step");
    if (member(*s, "upload") != nullptr) o.upload = numbers(*s, "upload");
    if (member(*s, "data") != nullptr) o.data = numbers(*s, "data");
  }
  return out;
}

// --- distributed -----------------------------------------------------------------------------

ordered_json to_json(const VsOneRank& v) {
  return ordered_json{
      {"baseline_case", v.baseline_case}, {"speedup", v.speedup}, {"efficiency", v.efficiency}};
}

// A host comm's case: its comm, buckets and gradient path. A tool runtime's: no host comm,
// buckets or gradient path; its communication time is the runtime's own where it exposes one,
// else absent with the reason (never 0).
ordered_json to_json(const Distributed& d) {
  ordered_json j{{"ranks", d.ranks}, {"launcher", d.launcher}, {"comm", d.comm}};
  if (d.host) {
    j["comm_library"] = d.host->comm_library;
    j["comm_on_stream"] = d.host->comm_on_stream;
    j["gradient_path"] = d.host->gradient_path;
    j["control_plane"] = d.host->control_plane;
    j["devices"] = d.host->devices;
  }
  j["scaling"] = d.scaling;
  j["global_batch"] = d.global_batch;
  j["per_rank_batch"] = d.per_rank_batch;
  if (d.host) {
    j["overlap"] = d.host->overlap;
    j["bucket_mb"] = d.host->bucket_mb;
    j["buckets"] = d.host->buckets;
    j["allreduce_bytes_per_step"] = d.host->allreduce_bytes_per_step;
  }
  j["compute"] = to_json(d.compute);
  if (d.tool) {
    j["runtime"] = d.tool->runtime;
    j["mode"] = d.tool->mode;
    j["runtime_library"] = d.tool->runtime_library;
    if (d.tool->bucket_mb) j["bucket_mb"] = *d.tool->bucket_mb;
    if (d.tool->comm_time)
      j["comm_time"] = *d.tool->comm_time;
    else
      j["comm_time_absent"] = d.tool->comm_time_absent;
  }
  if (d.allreduce) j["allreduce"] = to_json(*d.allreduce);
  if (d.exposed_comm) j["exposed_comm"] = to_json(*d.exposed_comm);
  ordered_json samples{{"compute", d.compute_samples}};
  if (d.allreduce) samples["allreduce"] = d.allreduce_samples;
  if (d.exposed_comm) samples["exposed_comm"] = d.exposed_comm_samples;
  j["samples"] = samples;
  if (d.vs_1_rank) j["vs_1_rank"] = to_json(*d.vs_1_rank);
  return j;
}

template <class Json>
std::optional<Distributed> read_distributed(const Json& record, bool with_samples) {
  const Json* d = object(record, "distributed");
  if (d == nullptr) return std::nullopt;
  Distributed out;
  out.ranks = integer(*d, "ranks", 1);
  out.launcher = text(*d, "launcher");
  out.comm = text(*d, "comm");
  // A host comm's record names its library and buckets; a tool runtime's names the runtime.
  if (member(*d, "comm_library") || member(*d, "overlap") || member(*d, "buckets")) {
    HostComm h;
    h.comm_library = text(*d, "comm_library");
    h.comm_on_stream = flag(*d, "comm_on_stream");
    h.gradient_path = text(*d, "gradient_path");
    h.control_plane = text(*d, "control_plane");
    if (const Json* v = member(*d, "devices"); v != nullptr && v->is_array())
      for (const auto& x : *v)
        if (x.is_number_integer()) h.devices.push_back(x.template get<int64_t>());
    h.overlap = flag(*d, "overlap");
    h.bucket_mb = number(*d, "bucket_mb");
    h.buckets = integer(*d, "buckets");
    h.allreduce_bytes_per_step = integer(*d, "allreduce_bytes_per_step");
    out.host = h;
  }
  out.scaling = text(*d, "scaling");
  out.global_batch = integer(*d, "global_batch");
  out.per_rank_batch = integer(*d, "per_rank_batch");
  out.compute = maybe_figures(*d, "compute").value_or(Figures{});
  if (member(*d, "runtime") != nullptr) {
    ToolRuntimeFields t;
    t.runtime = text(*d, "runtime");
    t.mode = text(*d, "mode");
    t.runtime_library = text(*d, "runtime_library");
    if (member(*d, "bucket_mb") != nullptr) t.bucket_mb = number(*d, "bucket_mb");
    if (member(*d, "comm_time") != nullptr) t.comm_time = text(*d, "comm_time");
    t.comm_time_absent = text(*d, "comm_time_absent");
    out.tool = t;
  }
  out.allreduce = maybe_figures(*d, "allreduce");
  out.exposed_comm = maybe_figures(*d, "exposed_comm");
  if (const Json* s = object(*d, "samples"); s != nullptr && with_samples) {
    out.compute_samples = numbers(*s, "compute");
    out.allreduce_samples = numbers(*s, "allreduce");
    out.exposed_comm_samples = numbers(*s, "exposed_comm");
  }
  if (const Json* v = object(*d, "vs_1_rank"))
    out.vs_1_rank = VsOneRank{text(*v, "baseline_case"), maybe_number(*v, "speedup").value_or(NAN),
                              number(*v, "efficiency")};
  return out;
}

// --- loss, memory, warnings ------------------------------------------------------------------

ordered_json to_json(const Loss& l) {
  return ordered_json{{"warmup_first", number_or_null(l.warmup_first)},
                      {"first", number_or_null(l.first)},
                      {"last", number_or_null(l.last)},
                      {"values", l.values}};
}

template <class Json>
std::optional<Loss> read_loss(const Json& record) {
  const Json* l = object(record, "loss");
  if (l == nullptr) return std::nullopt;
  return Loss{maybe_number(*l, "warmup_first"), maybe_number(*l, "first"), maybe_number(*l, "last"),
              numbers(*l, "values")};
}

// Peak over the run: the largest the backend reported after any step, not what it holds now.
ordered_json to_json(const Memory& m) {
  ordered_json j{{"peak_rss_bytes", m.peak_rss_bytes},
                 {"backend_bytes", m.backend_bytes},
                 {"backend_peak_bytes", m.backend_peak_bytes},
                 {"source", m.source}};
  if (m.device)
    j["device"] = ordered_json{{"in_use_bytes", m.device->in_use_bytes},
                               {"peak_bytes", m.device->peak_bytes},
                               {"free_bytes", m.device->free_bytes},
                               {"total_bytes", m.device->total_bytes}};
  return j;
}

template <class Json>
std::optional<Memory> read_memory(const Json& record) {
  const Json* m = object(record, "memory");
  if (m == nullptr) return std::nullopt;
  Memory out;
  out.peak_rss_bytes = bytes(*m, "peak_rss_bytes");
  out.backend_bytes = bytes(*m, "backend_bytes");
  out.backend_peak_bytes = bytes(*m, "backend_peak_bytes");
  out.source = text(*m, "source");
  if (const Json* d = object(*m, "device"))
    out.device = DeviceMemory{bytes(*d, "in_use_bytes"), bytes(*d, "peak_bytes"),
                              bytes(*d, "free_bytes"), bytes(*d, "total_bytes")};
  return out;
}

ordered_json to_json(const std::vector<Warning>& warnings) {
  ordered_json out = ordered_json::array();
  for (const Warning& w : warnings)
    out.push_back(ordered_json{{"code", w.code}, {"message", w.message}});
  return out;
}

template <class Json>
std::optional<std::vector<Warning>> read_warnings(const Json& record) {
  const Json* w = member(record, "warnings");
  if (w == nullptr || !w->is_array()) return std::nullopt;
  std::vector<Warning> out;
  for (const auto& x : *w) out.push_back(Warning{text(x, "code"), text(x, "message")});
  return out;
}

// The readers for both kinds of JSON: a record as the runner holds it, and as read back.
#define DLHOST_RECORD_READERS(Json)                                        \
  template Figures read_figures(const Json&);                              \
  template std::optional<Backend> read_backend(const Json&);               \
  template std::optional<Network> read_network(const Json&);               \
  template std::optional<Resolved> read_resolved(const Json&);             \
  template std::optional<Timing> read_timing(const Json&, bool);           \
  template std::optional<Distributed> read_distributed(const Json&, bool); \
  template std::optional<Loss> read_loss(const Json&);                     \
  template std::optional<Memory> read_memory(const Json&);                 \
  template std::optional<std::vector<Warning>> read_warnings(const Json&); \
  template const Json* block_of(const Json&, const char*);
DLHOST_RECORD_READERS(nlohmann::json)
DLHOST_RECORD_READERS(nlohmann::ordered_json)
#undef DLHOST_RECORD_READERS

}  // namespace dlhost::record
