// plugin_kit.hpp — what every kind of plugin kit shares: the plugin's identity written once
// (PluginInfo: name, version, description), per-case options as a C++ object, the entry
// function's work (attach the host, fill the dlhost_plugin table, catch what construction throws)
// and the one cache that makes a version string outlive the call that reported it.
//
// backend_kit.hpp and comm_kit.hpp build on it; a plugin includes one of those, not this file.
// Header-only and compiled into the plugin; no C++ type crosses the ABI.
// Thread-safety: the entry runs once, from one thread (dlhost_abi.h); Options is read-only.
#ifndef DLHOST_PLUGIN_KIT_HPP
#define DLHOST_PLUGIN_KIT_HPP

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "dlhost/dlhost.hpp"

namespace dlhost::sdk {

// Who the plugin is: the only place its name and version are written. The strings must live as
// long as the library (string literals do).
struct PluginInfo {
  const char* name;         // [a-z0-9_], what suites and the CLI use
  const char* version;      // the plugin's own version, "1.0.0"
  const char* description;  // one line for `dlhost plugins`
};

// The per-case options of one call, borrowed for that call (`dlhost_options` is host-owned).
class Options {
 public:
  explicit Options(const dlhost_options* options) : options_(options) {}
  std::optional<std::string> get(const char* key) const {
    if (options_ == nullptr) return std::nullopt;
    return option(options_, key);
  }
  // The integer value of `key`, or nullopt when absent; INVALID_ARGUMENT when not an integer.
  std::optional<int64_t> get_int(const char* key) const {
    if (!get(key)) return std::nullopt;
    return option_int(options_, key, 0);
  }
  int64_t get_int(const char* key, int64_t fallback) const {
    return get_int(key).value_or(fallback);
  }
  const dlhost_options* raw() const { return options_; }

 private:
  const dlhost_options* options_;
};

namespace detail {

// The plugin's name for error messages, set by the entry before any other call.
inline const char*& plugin_name() {
  static const char* name = "plugin";
  return name;
}

// "<plugin>: <call>: <what>" as INVALID_ARGUMENT: a NULL handle or out-parameter.
[[noreturn]] inline void null_argument(const char* call, const char* what) {
  invalid(std::string(plugin_name()) + ": " + call + ": " + what + " is NULL");
}
template <class T>
T& deref(T* p, const char* call, const char* what) {
  if (p == nullptr) null_argument(call, what);
  return *p;
}

// A string computed once (a library's version, asked of the library at run time) and kept for
// the library's lifetime, as the ABI's `const char*` fields ask. Thread-safe.
class OnceString {
 public:
  template <class Make>
  const char* get(Make&& make) {
    std::call_once(once_, [&] { value_ = make(); });
    return value_.c_str();
  }

 private:
  std::once_flag once_;
  std::string value_;
};

// Attaches the host, constructs the plugin object with `make` and fills the plugin table. NULL
// (after logging why) when the host is incompatible or construction throws. `tables` sets the
// kind and the kind's table pointer.
template <class Make, class Tables>
const dlhost_plugin* enter(const dlhost_host_api* host, const PluginInfo& info,
                           dlhost_status* (*query)(int32_t*), Make&& make, Tables&& tables) {
  if (!attach_host(host, info.name)) return nullptr;
  plugin_name() = info.name;
  try {
    make();
  } catch (const std::exception& e) {
    log(DLHOST_LOG_ERROR, info.name, std::string("cannot initialize: ") + e.what());
    return nullptr;
  }
  static dlhost_plugin plugin = make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
  plugin.abi_major = DLHOST_ABI_MAJOR;
  plugin.abi_minor = DLHOST_ABI_MINOR;
  plugin.name = info.name;
  plugin.version = info.version;
  plugin.description = info.description;
  plugin.query = query;
  tables(plugin);
  return &plugin;
}

}  // namespace detail
}  // namespace dlhost::sdk

#endif  // DLHOST_PLUGIN_KIT_HPP
