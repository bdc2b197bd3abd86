// common.hpp — the part of the C++ comfort layer every plugin uses, dnnl.hpp-style: the host's
// services kept by the entry (host()), errors (Error, fail(), unimplemented(), invalid()) and the
// boundary between them and statuses (guard(), check()), log(), the per-case options (Options,
// the one way to read them), the ABI structs' helpers (make_struct, dtype_size, whole_optimizer)
// and read-only helpers over the graph a backend compiles. The graph builder of a network plugin
// is builder.hpp; dlhost.hpp includes both, as it did before they were split.
//
// It is compiled into the plugin and never crosses the boundary: exceptions thrown by plugin code
// become dlhost_status objects in guard(), statuses returned by the host (builder calls) become
// exceptions in check(). It needs nothing but the C headers and the standard library.
//
// Thread-safety: host() is set once by the entry function before any other call; everything
// else is as thread-safe as the host functions it calls; Options is read-only.
#ifndef DLHOST_COMMON_HPP
#define DLHOST_COMMON_HPP

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dlhost/dlhost.h"

// How this plugin was compiled (DLHOST_PLUGIN_BUILD_SYMBOL in dlhost_abi.h): the host warns in
// every record of a case run on a plugin built without optimisation. An inline variable, so that
// every translation unit may include this header, marked used so that it is emitted although
// nothing in the plugin reads it; the version script exports it beside the entry.
#define DLHOST_DETAIL_STR2(x) #x
#define DLHOST_DETAIL_STR(x) DLHOST_DETAIL_STR2(x)
#if defined(__OPTIMIZE__)
#define DLHOST_DETAIL_BUILD_OPT "optimized=1"
#else
#define DLHOST_DETAIL_BUILD_OPT "optimized=0"
#endif
#if defined(NDEBUG)
#define DLHOST_DETAIL_BUILD_NDEBUG " ndebug=1"
#else
#define DLHOST_DETAIL_BUILD_NDEBUG " ndebug=0"
#endif
#if defined(__clang__)
#define DLHOST_DETAIL_BUILD_COMPILER " compiler=clang-" DLHOST_DETAIL_STR(__clang_major__)
#elif defined(__GNUC__)
#define DLHOST_DETAIL_BUILD_COMPILER " compiler=gcc-" DLHOST_DETAIL_STR(__GNUC__)
#else
#define DLHOST_DETAIL_BUILD_COMPILER " compiler=other"
#endif
extern "C" {
DLHOST_EXPORT __attribute__((used)) inline const char dlhost_plugin_build[] =
    DLHOST_DETAIL_BUILD_OPT DLHOST_DETAIL_BUILD_NDEBUG DLHOST_DETAIL_BUILD_COMPILER;
}

namespace dlhost::sdk {

// The host's services, kept by the entry function. Each plugin library has its own copy (the
// plugin is built with hidden visibility), so two plugins never share it.
inline const dlhost_host_api*& host_slot() {
  static const dlhost_host_api* host = nullptr;
  return host;
}
inline const dlhost_host_api* host() { return host_slot(); }

// Checks the host's major version and keeps the table. Returns false (after logging) when the
// plugin cannot use this host.
inline bool attach_host(const dlhost_host_api* host, const char* plugin_name) {
  if (host == nullptr || host->struct_size < DLHOST_HOST_API_STRUCT_SIZE_1_0) return false;
  host_slot() = host;
  if (host->abi_major != DLHOST_ABI_MAJOR) {
    std::string msg = std::string(plugin_name) + " was built for dlhost ABI " +
                      std::to_string(DLHOST_ABI_MAJOR) + ", host speaks " +
                      std::to_string(host->abi_major);
    host->log(DLHOST_LOG_ERROR, plugin_name, msg.c_str());
    host_slot() = nullptr;
    return false;
  }
  return true;
}

// An error with an absl status code, thrown inside the plugin and turned into a status by guard().
class Error : public std::runtime_error {
 public:
  Error(dlhost_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  dlhost_code code() const { return code_; }

 private:
  dlhost_code code_;
};

[[noreturn]] inline void fail(dlhost_code code, const std::string& message) {
  throw Error(code, message);
}
[[noreturn]] inline void unimplemented(const std::string& message) {
  throw Error(DLHOST_CODE_UNIMPLEMENTED, message);
}
[[noreturn]] inline void invalid(const std::string& message) {
  throw Error(DLHOST_CODE_INVALID_ARGUMENT, message);
}

inline dlhost_status* make_status(dlhost_code code, const std::string& message) {
  return host()->status_create(code, message.c_str());
}

// Runs `body` and turns every exception into a status; NULL on success: Error keeps its code,
// std::bad_alloc is RESOURCE_EXHAUSTED, anything else INTERNAL. The kits (backend_kit.hpp,
// comm_kit.hpp) wrap every table entry in it; a hand-written table entry should be
// `return guard([&] { ... });`.
template <class Body>
dlhost_status* guard(Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const Error& e) {
    return make_status(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make_status(DLHOST_CODE_RESOURCE_EXHAUSTED, "out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return make_status(DLHOST_CODE_INTERNAL, e.what());
  } catch (...) {
    return make_status(DLHOST_CODE_INTERNAL, "unknown exception (not a std::exception)");
  }
}

// Turns a status returned by the host into an exception (and releases it).
inline void check(dlhost_status* status) {
  if (status == nullptr) return;
  auto code = static_cast<dlhost_code>(host()->status_code(status));
  std::string message = host()->status_message(status);
  host()->status_destroy(status);
  throw Error(code, message);
}

inline void log(dlhost_log_level level, const char* source, const std::string& message) {
  if (host() != nullptr && host()->log_enabled(level)) host()->log(level, source, message.c_str());
}

namespace detail {

// The plugin's name for error messages, set by the entry (plugin_kit.hpp) before any other call.
inline const char*& plugin_name() {
  static const char* name = "plugin";
  return name;
}

// "option 'KEY' must be WHAT, got 'VALUE'" (INVALID_ARGUMENT).
[[noreturn]] inline void bad_option(const char* key, const char* what, const std::string& value) {
  invalid(std::string("option '") + key + "' must be " + what + ", got '" + value + "'");
}

// strtoll and strtod skip leading blanks: " 8" is text, not the 8 a case id would print as "-8".
inline bool parsed_whole(const std::string& value, const char* end) {
  return end != value.c_str() && *end == '\0' &&
         !std::isspace(static_cast<unsigned char>(value[0]));
}

}  // namespace detail

// The per-case options of one call, borrowed for that call (`dlhost_options` is host-owned): the
// SDK's one API for reading them. Every typed read refuses a value not of its type with
// INVALID_ARGUMENT naming the key ("option 'seq' must be an integer, got 'x'").
class Options {
 public:
  explicit Options(const dlhost_options* options) : options_(options) {}
  std::optional<std::string> get(const char* key) const {
    if (options_ == nullptr) return std::nullopt;
    const char* value = host()->option_get(options_, key);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  }
  // The integer value of `key`, or nullopt when absent.
  std::optional<int64_t> get_int(const char* key) const {
    auto value = get(key);
    if (!value) return std::nullopt;
    char* end = nullptr;
    const long long parsed = std::strtoll(value->c_str(), &end, 10);
    if (!detail::parsed_whole(*value, end)) detail::bad_option(key, "an integer", *value);
    return parsed;
  }
  int64_t get_int(const char* key, int64_t fallback) const {
    return get_int(key).value_or(fallback);
  }
  // The integer value of `key` in [lo, hi], or `fallback` when absent; INVALID_ARGUMENT naming
  // the plugin, the key, the value and the range otherwise ("cpu_mxnet: option threads=5000 out
  // of range [0, 4096]"). E.g. the host-set threads: get_int_in("threads", 0, 0, kMaxThreads).
  int64_t get_int_in(const char* key, int64_t fallback, int64_t lo, int64_t hi) const {
    const int64_t value = get_int(key, fallback);
    if (value < lo || value > hi)
      invalid(std::string(detail::plugin_name()) + ": option " + key + "=" + std::to_string(value) +
              " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return value;
  }
  // A number, a flag ("true"/"false"/"1"/"0") or a string, or `fallback` when absent.
  double get_double(const char* key, double fallback) const {
    auto value = get(key);
    if (!value) return fallback;
    char* end = nullptr;
    const double parsed = std::strtod(value->c_str(), &end);
    if (!detail::parsed_whole(*value, end)) detail::bad_option(key, "a number", *value);
    return parsed;
  }
  bool get_bool(const char* key, bool fallback) const {
    auto value = get(key);
    if (!value) return fallback;
    if (*value == "true" || *value == "1") return true;
    if (*value == "false" || *value == "0") return false;
    detail::bad_option(key, "true or false", *value);
  }
  std::string get_string(const char* key, const std::string& fallback) const {
    return get(key).value_or(fallback);
  }
  const dlhost_options* raw() const { return options_; }

 private:
  const dlhost_options* options_;
};

// The same reads as free functions of the raw options: thin aliases of Options, kept so that a
// plugin written against them still compiles. New code reads through Options.
inline std::optional<std::string> option(const dlhost_options* options, const char* key) {
  return Options(options).get(key);
}
inline int64_t option_int(const dlhost_options* options, const char* key, int64_t fallback) {
  return Options(options).get_int(key, fallback);
}
inline double option_double(const dlhost_options* options, const char* key, double fallback) {
  return Options(options).get_double(key, fallback);
}
inline bool option_bool(const dlhost_options* options, const char* key, bool fallback) {
  return Options(options).get_bool(key, fallback);
}

// Bytes per element of a dlhost_dtype; 0 for a value the ABI does not define.
inline size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case DLHOST_DTYPE_F16:
    case DLHOST_DTYPE_BF16:
      return 2;
    case DLHOST_DTYPE_F32:
    case DLHOST_DTYPE_I32:
      return 4;
    case DLHOST_DTYPE_F64:
    case DLHOST_DTYPE_I64:
      return 8;
    default:
      return 0;
  }
}

// Zero-initialized ABI struct with its struct_size set.
template <class T>
T make_struct(size_t struct_size) {
  T value{};
  value.struct_size = struct_size;
  return value;
}

// The optimizer as this header knows it, from a host's struct of any minor: the fields the host's
// struct_size covers, the rest at their documented defaults (AdamW's PyTorch betas and epsilon),
// so a backend reads every field without a DLHOST_HAS_FIELD of its own.
inline dlhost_optimizer_desc whole_optimizer(const dlhost_optimizer_desc& given) {
  if (given.struct_size < DLHOST_OPTIMIZER_DESC_STRUCT_SIZE_1_0)
    invalid("compile: optimizer older than ABI 1.0");
  dlhost_optimizer_desc whole{};
  whole.beta1 = 0.9f;
  whole.beta2 = 0.999f;
  whole.epsilon = 1e-8f;
  std::memcpy(&whole, &given, std::min(given.struct_size, sizeof whole));
  whole.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE;
  return whole;
}

// Read-only helpers over the graph a backend compiles.
inline const dlhost_tensor_desc& tensor(const dlhost_graph* g, int32_t id) {
  if (id < 0 || id >= g->num_tensors) invalid("tensor id " + std::to_string(id) + " out of range");
  return *g->tensors[id];
}
inline std::vector<int64_t> dims_of(const dlhost_tensor_desc& t) {
  return std::vector<int64_t>(t.dims, t.dims + t.rank);
}
// The op's name as the docs and `dlhost conform` write it ("conv2d"), for error messages.
inline std::string op_name(int32_t op) {
  static const char* const names[] = {"input",      "fc",
                                      "conv2d",     "pool2d",
                                      "activation", "softmax_cross_entropy",
                                      "mse_loss",   "batch_norm",
                                      "dropout",    "add",
                                      "lrn",        "embedding",
                                      "lstm",       "global_avg_pool",
                                      "layer_norm", "gelu",
                                      "attention",  "position_embedding",
                                      "tied_fc"};
  const int32_t count = static_cast<int32_t>(sizeof(names) / sizeof(names[0]));
  return op >= 1 && op <= count ? names[op - 1] : "op " + std::to_string(op);
}
inline int64_t element_count(const dlhost_tensor_desc& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

}  // namespace dlhost::sdk

#endif  // DLHOST_COMMON_HPP
