// blocks.cpp — see blocks.h. Each block's fields are listed ONCE, in `fields(v, block)`: the
// record's key and the struct's member, in the record's order. The writer (Writer) and the reader
// (Reader) both walk that list, so a field added or renamed is changed for both at once. What is
// not a plain always-written field says so in the list: optional members are written when present
// (`or_null`: written null when absent), `part` is a group of fields some records have, and a
// field the writer keeps under a condition is listed under `V::reads ||` that condition (the
// reader reads it whenever present). test_record_blocks writes and reads back every field.
#include "record/blocks.h"

#include <cmath>
#include <initializer_list>
#include <type_traits>

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
const Json* object(const Json& j, const char* key) {
  const Json* v = member(j, key);
  return v != nullptr && v->is_object() ? v : nullptr;
}

// The elements of the array `key` that are of the kind `is_kind` tests; the others are skipped.
template <class T, class Json>
std::vector<T> elements(const Json& j, const char* key, bool (Json::*is_kind)() const noexcept) {
  std::vector<T> out;
  const Json* v = member(j, key);
  if (v != nullptr && v->is_array())
    for (const auto& x : *v)
      if ((x.*is_kind)()) out.push_back(x.template get<T>());
  return out;
}

// A count held as a double: the integer it is where it is one (as the runner's int64 wrote it).
ordered_json count_json(double v) {
  if (v == std::floor(v) && std::abs(v) < 9.2e18) return ordered_json(static_cast<int64_t>(v));
  return ordered_json(v);
}

// Written as JSON as they are (numbers, strings, arrays); any other member is a block of its own.
template <class T>
struct is_value : std::is_arithmetic<T> {};
template <>
struct is_value<std::string> : std::true_type {};
template <class T>
struct is_value<std::vector<T>> : std::true_type {};

// --- each block's one field list --------------------------------------------------------------
// `Self` is the block (the reader fills it) or the const block (the writer reads it).

template <class Self, class Block>
using if_block = std::enable_if_t<std::is_same_v<std::remove_const_t<Self>, Block>>;

// Not measured: every figure written null (to_json(Figures)); read back, a null median says so.
template <class V, class F>
auto fields(V& v, F& f) -> if_block<F, Figures> {
  v("mean", f.mean);
  v("median", f.median);
  v("min", f.min);
  v("max", f.max);
  v("p5", f.p5);
  v("p95", f.p95);
  v("stddev", f.stddev);
}

template <class V, class D>
auto fields(V& v, D& d) -> if_block<D, Device> {
  v("index", d.index);
  v("selected_by", d.selected_by);
  v("name", d.name);
  v("model", d.model);
  v("cores", d.cores);
  v("isa", d.isa);
  v("memory_bytes", d.memory_bytes);
  v("library", d.library);
}

template <class V, class B>
auto fields(V& v, B& b) -> if_block<B, PluginBuild> {
  v("text", b.text);
  v("optimized", b.optimized);  // absent: true, the struct's default
}

template <class V, class B>
auto fields(V& v, B& b) -> if_block<B, Backend> {
  v("name", b.name);
  v("version", b.version);
  v("path", b.path);
  v.or_null("build", b.build);
  v("device", b.device);
  v("chosen_by", b.chosen_by);
}

template <class V, class N>
auto fields(V& v, N& n) -> if_block<N, Network> {
  v("name", n.name);
  v("plugin", n.plugin);
  v("batch", n.batch);
  v("input_shape", n.input_shape);
  v("params", n.params);
  v("forward_flops_per_sample", n.forward_flops_per_sample);
  // Language models only: a network whose data input is not token ids has no tokens.
  if (V::reads || n.tokens_per_sample > 0) v.count("tokens_per_sample", n.tokens_per_sample);
}

template <class V, class O>
auto fields(V& v, O& o) -> if_block<O, Optimizer> {
  v("kind", o.kind);
  v("lr", o.lr);
  v("momentum", o.momentum);
  v("weight_decay", o.weight_decay);
  v("clip_norm", o.clip_norm);
  if (V::reads || o.kind == "adamw") {
    v("beta1", o.beta1);
    v("beta2", o.beta2);
    v("epsilon", o.epsilon);
  }
}

template <class V, class R>
auto fields(V& v, R& r) -> if_block<R, Resolved> {
  v("batch", r.batch);
  v("global_batch", r.global_batch);
  v("threads_requested", r.threads_requested);
  v("threads_used", r.threads_used);
  v("precision", r.precision);
  v("optimizer", r.optimizer);
  v("implementation", r.implementation);
  // Where the backend says this model is knowingly faster than the framework's own users get
  // it (ABI 1.5); absent when none.
  if (V::reads || !r.departures.empty()) v("departures", r.departures);
}

template <class V, class T>
auto fields(V& v, T& t) -> if_block<T, Timing> {
  v.constant("unit", "ms");
  v("timer", t.timer);
  v("input", t.input);
  v("upload_pinned", t.upload_pinned);
  if (V::reads || t.upload_pinned) v("upload_via", t.upload_via);
  v("warmup", t.warmup);
  v("iterations", t.iterations);
  v("build_ms", t.build_ms);
  v("compile_ms", t.compile_ms);
  v("init_ms", t.init_ms);
  // Fused: the backend did the step's work otherwise than the three calls say, so forward,
  // backward and update are not a breakdown of the step.
  v("fused_step", t.fused_step);
  v("step", t.step);
  v("forward", t.forward);
  v("backward", t.backward);
  v("update", t.update);
  v("upload", t.upload);
  // Real data: the step's wait for its mini-batch from the input pipeline (inside `step`).
  v("data", t.data);
  v("wall_step", t.wall_step);
  v.or_null("samples_per_second", t.samples_per_second);
  v.or_null("samples_per_second_mean", t.samples_per_second_mean);
  v.or_null_when(t.has_tokens, "tokens_per_second", t.tokens_per_second);
  v.or_null("train_gflops_per_second_est", t.train_gflops_per_second_est);
  v.samples("samples", [&](auto& s) {
    auto& x = t.samples;
    s("step", x.step);
    s("forward", x.forward);
    s("backward", x.backward);
    s("update", x.update);
    s("wall_step", x.wall_step);
    s("upload", x.upload);
    s("data", x.data);
  });
  // A tool that owns its loop: its lines on what it timed and how, and the host clock around its
  // one call (a record with owned_loop_ms has them).
  v.part({"owned_loop_ms"}, t.owned_loop, [&](auto& o) {
    v("clock", o.clock);
    v("loop", o.loop);
    v("owned_loop_ms", o.call_ms);
  });
}

template <class V, class R>
auto fields(V& v, R& r) -> if_block<R, VsOneRank> {
  v("baseline_case", r.baseline_case);
  v("speedup", r.speedup);
  v("efficiency", r.efficiency);
}

// A host comm's case: its comm, buckets and gradient path (a record with any of three of their
// keys has them). A tool runtime's: no host comm, buckets or gradient path; its communication
// time is the runtime's own where it exposes one, else absent with the reason (never 0).
template <class V, class D>
auto fields(V& v, D& d) -> if_block<D, Distributed> {
  const auto host_comm = {"comm_library", "overlap", "buckets"};
  v("ranks", d.ranks);
  v("launcher", d.launcher);
  v("comm", d.comm);
  v.part(host_comm, d.host, [&](auto& h) {
    v("comm_library", h.comm_library);
    v("comm_on_stream", h.comm_on_stream);
    v("gradient_path", h.gradient_path);
    v("control_plane", h.control_plane);
    v("devices", h.devices);
  });
  v("scaling", d.scaling);
  v("global_batch", d.global_batch);
  v("per_rank_batch", d.per_rank_batch);
  v.part(host_comm, d.host, [&](auto& h) {
    v("overlap", h.overlap);
    v("bucket_mb", h.bucket_mb);
    v("buckets", h.buckets);
    v("allreduce_bytes_per_step", h.allreduce_bytes_per_step);
  });
  v("compute", d.compute);
  v.part({"runtime"}, d.tool, [&](auto& tool) {
    v("runtime", tool.runtime);
    v("mode", tool.mode);
    v("runtime_library", tool.runtime_library);
    v("bucket_mb", tool.bucket_mb);
    v("comm_time", tool.comm_time);
    if (V::reads || !tool.comm_time) v("comm_time_absent", tool.comm_time_absent);
  });
  v("allreduce", d.allreduce);
  v("exposed_comm", d.exposed_comm);
  v.samples("samples", [&](auto& s) {
    s("compute", d.compute_samples);
    if (V::reads || d.allreduce) s("allreduce", d.allreduce_samples);
    if (V::reads || d.exposed_comm) s("exposed_comm", d.exposed_comm_samples);
  });
  v("vs_1_rank", d.vs_1_rank);
}

template <class V, class L>
auto fields(V& v, L& l) -> if_block<L, Loss> {
  v.or_null("warmup_first", l.warmup_first);
  v.or_null("first", l.first);
  v.or_null("last", l.last);
  v("values", l.values);
}

template <class V, class D>
auto fields(V& v, D& d) -> if_block<D, DeviceMemory> {
  v("in_use_bytes", d.in_use_bytes);
  v("peak_bytes", d.peak_bytes);
  v("free_bytes", d.free_bytes);
  v("total_bytes", d.total_bytes);
}

// Peak over the run: the largest the backend reported after any step, not what it holds now.
template <class V, class M>
auto fields(V& v, M& m) -> if_block<M, Memory> {
  v("peak_rss_bytes", m.peak_rss_bytes);
  v("backend_bytes", m.backend_bytes);
  v("backend_peak_bytes", m.backend_peak_bytes);
  v("source", m.source);
  v("device", m.device);
}

template <class V, class W>
auto fields(V& v, W& w) -> if_block<W, Warning> {
  v("code", w.code);
  v("message", w.message);
}

// --- the writer: a block's fields into a JSON object, in the list's order ----------------------

class Writer {
 public:
  static constexpr bool reads = false;
  explicit Writer(ordered_json& j) : j_(j) {}

  template <class T>
  void operator()(const char* key, const T& value) {
    j_[key] = json_of(value);
  }
  // Written when present.
  template <class T>
  void operator()(const char* key, const std::optional<T>& value) {
    if (value) j_[key] = json_of(*value);
  }
  // Written null when absent.
  template <class T>
  void or_null(const char* key, const std::optional<T>& value) {
    j_[key] = value ? json_of(*value) : ordered_json(nullptr);
  }
  // Written (null when absent) only when `written`.
  void or_null_when(bool written, const char* key, const std::optional<double>& value) {
    if (written) or_null(key, value);
  }
  void count(const char* key, double value) { j_[key] = count_json(value); }
  void constant(const char* key, const char* value) { j_[key] = value; }
  // The part's fields, in place, when the record has the part.
  template <class Part, class List>
  void part(std::initializer_list<const char*>, const std::optional<Part>& p, List list) {
    if (p) list(*p);
  }
  // An object of its own, the fields `list` writes into it.
  template <class List>
  void samples(const char* key, List list) {
    ordered_json o = ordered_json::object();
    Writer w(o);
    list(w);
    j_[key] = std::move(o);
  }

 private:
  static ordered_json json_of(const Figures& f) { return to_json(f); }
  template <class T>
  static ordered_json json_of(const T& value) {
    if constexpr (is_value<T>::value) {
      return ordered_json(value);
    } else {
      ordered_json o = ordered_json::object();
      Writer w(o);
      fields(w, value);
      return o;
    }
  }

  ordered_json& j_;
};

template <class Block>
ordered_json write_block(const Block& block) {
  ordered_json j = ordered_json::object();
  Writer w(j);
  fields(w, block);
  return j;
}

// --- the reader: a block's fields from a JSON object, leniently --------------------------------
// An absent or mistyped field reads as the member's default, an absent optional as nullopt
// (present when it has its kind: a boolean, an object for a block, any value otherwise).

template <class Json>
class Reader {
 public:
  static constexpr bool reads = true;
  Reader(const Json& j, bool with_samples) : j_(j), with_samples_(with_samples) {}

  void operator()(const char* key, std::string& x) const { x = text(j_, key); }
  void operator()(const char* key, bool& x) const { x = flag(j_, key, x); }
  void operator()(const char* key, int32_t& x) const {
    x = static_cast<int32_t>(integer(j_, key, x));
  }
  void operator()(const char* key, int64_t& x) const { x = integer(j_, key, x); }
  void operator()(const char* key, uint64_t& x) const { x = bytes(j_, key); }
  void operator()(const char* key, double& x) const { x = maybe_number(j_, key).value_or(x); }
  void operator()(const char* key, std::vector<double>& x) const {
    x = elements<double>(j_, key, &Json::is_number);
  }
  void operator()(const char* key, std::vector<int64_t>& x) const {
    x = elements<int64_t>(j_, key, &Json::is_number_integer);
  }
  void operator()(const char* key, std::vector<std::string>& x) const {
    x = elements<std::string>(j_, key, &Json::is_string);
  }
  void operator()(const char* key, Figures& x) const {
    if (const Json* f = object(j_, key)) x = read_figures(*f);
  }
  template <class Block>
  void operator()(const char* key, Block& x) const {
    if (const Json* b = object(j_, key)) {
      Reader r(*b, with_samples_);
      fields(r, x);
    }
  }
  template <class T>
  void operator()(const char* key, std::optional<T>& x) const {
    const Json* v = member(j_, key);
    if (v == nullptr) return;
    if constexpr (std::is_same_v<T, bool>) {
      if (!v->is_boolean()) return;
    } else if constexpr (!is_value<T>::value) {
      if (!v->is_object()) return;
    }
    x.emplace();
    (*this)(key, *x);
  }
  void or_null(const char* key, std::optional<double>& x) const { x = maybe_number(j_, key); }
  template <class Block>
  void or_null(const char* key, std::optional<Block>& x) const {
    (*this)(key, x);
  }
  void or_null_when(bool& written, const char* key, std::optional<double>& x) const {
    written = member(j_, key) != nullptr;
    or_null(key, x);
  }
  void count(const char* key, double& x) const { (*this)(key, x); }
  void constant(const char*, const char*) const {}
  template <class Part, class List>
  void part(std::initializer_list<const char*> marks, std::optional<Part>& p, List list) const {
    for (const char* key : marks)
      if (member(j_, key) != nullptr) {
        if (!p) p.emplace();
        list(*p);
        return;
      }
  }
  // The per-step samples, only for a reader that asked for them.
  template <class List>
  void samples(const char* key, List list) const {
    if (!with_samples_) return;
    if (const Json* s = object(j_, key)) {
      Reader r(*s, with_samples_);
      list(r);
    }
  }

 private:
  const Json& j_;
  bool with_samples_;
};

template <class Block, class Json>
std::optional<Block> read_block(const Json& record, const char* key, bool with_samples = false) {
  const Json* b = object(record, key);
  if (b == nullptr) return std::nullopt;
  Block out;
  Reader<Json> r(*b, with_samples);
  fields(r, out);
  return out;
}

}  // namespace

template <class Json>
const Json* block_of(const Json& record, const char* key) {
  return object(record, key);
}

// --- the writers and readers -----------------------------------------------------------------

ordered_json to_json(const Figures& f) {
  ordered_json j = ordered_json::object();
  // Not measured: every figure null, none 0, which a reader would take for a measured time.
  auto write = [&](const char* key, double x) {
    j[key] = f.measured ? ordered_json(x) : ordered_json(nullptr);
  };
  fields(write, f);
  return j;
}

template <class Json>
Figures read_figures(const Json& f) {
  Figures out;
  Reader<Json> r(f, false);
  fields(r, out);
  out.measured = maybe_number(f, "median").has_value();
  return out;
}

ordered_json to_json(const Backend& b) { return write_block(b); }
ordered_json to_json(const Network& n) { return write_block(n); }
ordered_json to_json(const Optimizer& o) { return write_block(o); }
ordered_json to_json(const Resolved& r) { return write_block(r); }
ordered_json to_json(const Timing& t) { return write_block(t); }
ordered_json to_json(const VsOneRank& v) { return write_block(v); }
ordered_json to_json(const Distributed& d) { return write_block(d); }
ordered_json to_json(const Loss& l) { return write_block(l); }
ordered_json to_json(const Memory& m) { return write_block(m); }

ordered_json to_json(const std::vector<Warning>& warnings) {
  ordered_json out = ordered_json::array();
  for (const Warning& w : warnings) out.push_back(write_block(w));
  return out;
}

template <class Json>
std::optional<Backend> read_backend(const Json& record) {
  return read_block<Backend>(record, "backend");
}
template <class Json>
std::optional<Network> read_network(const Json& record) {
  return read_block<Network>(record, "network");
}
template <class Json>
std::optional<Resolved> read_resolved(const Json& record) {
  return read_block<Resolved>(record, "resolved");
}
template <class Json>
std::optional<Timing> read_timing(const Json& record, bool with_samples) {
  return read_block<Timing>(record, "timing", with_samples);
}
template <class Json>
std::optional<Distributed> read_distributed(const Json& record, bool with_samples) {
  return read_block<Distributed>(record, "distributed", with_samples);
}
template <class Json>
std::optional<Loss> read_loss(const Json& record) {
  return read_block<Loss>(record, "loss");
}
template <class Json>
std::optional<Memory> read_memory(const Json& record) {
  return read_block<Memory>(record, "memory");
}

template <class Json>
std::optional<std::vector<Warning>> read_warnings(const Json& record) {
  const Json* w = member(record, "warnings");
  if (w == nullptr || !w->is_array()) return std::nullopt;
  std::vector<Warning> out;
  for (const auto& x : *w) {
    Warning one;
    Reader<Json> r(x, false);
    fields(r, one);
    out.push_back(one);
  }
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
