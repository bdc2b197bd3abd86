// plugin_kit.hpp — what every kind of plugin kit shares: the plugin's identity written once
// (PluginInfo: name, version, description), the options a plugin declares (OptionSpec, published as
// ABI 1.2's DLHOST_EXT_OPTION_SCHEMA), the extension chain hung on dlhost_plugin.extensions, the
// entry function's work (attach the host, fill the dlhost_plugin table, catch what construction
// throws) and the one cache that makes a version string outlive the call that reported it.
//
// backend_kit.hpp and comm_kit.hpp build on it; a plugin includes one of those, not this file.
// Per-case options are read through common.hpp's Options, which this header brings.
// Header-only and compiled into the plugin; no C++ type crosses the ABI.
// Thread-safety: the entry runs once, from one thread (dlhost_abi.h).
#ifndef DLHOST_PLUGIN_KIT_HPP
#define DLHOST_PLUGIN_KIT_HPP

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dlhost/common.hpp"
#include "dlhost/dlhost_device.h"

namespace dlhost::sdk {

// Who the plugin is: the only place its name and version are written. The strings must live as
// long as the library (string literals do).
struct PluginInfo {
  const char* name;         // [a-z0-9_], what suites and the CLI use
  const char* version;      // the plugin's own version, "1.0.0"
  const char* description;  // one line for `dlhost plugins`
};

// One option the plugin reads, declared so that the host lists it (`dlhost plugins -v`) and
// refuses an unknown or mistyped one before a case starts. Host-set keys (threads, seed,
// precision, loss_scale) are not declared. Strings must live as long as the library (literals).
struct OptionSpec {
  const char* name;               // [a-z0-9_]
  dlhost_option_type type;        // DLHOST_OPTION_BOOL/INT/FLOAT/STRING/ENUM
  const char* default_value;      // as text; nullptr when there is none
  const char* help;               // one line
  const char* choices = nullptr;  // DLHOST_OPTION_ENUM: "a|b|c"; DLHOST_OPTION_INT: "MIN..MAX",
                                  // the range get_int_in reads it with, so that the host
                                  // refuses a value outside it at load (dlhost validate)
};

// The most threads a "threads" option may ask for: more is a typo, not a machine. The host's
// `threads` case key has the same bound (suite/schema.cpp); kThreadsRange declares it for an
// option of the plugin's own (OptionSpec::choices).
inline constexpr int64_t kMaxThreads = 4096;
inline constexpr const char* kThreadsRange = "0..4096";

// The declaration of a plugin that reads no option of its own (only host-set keys).
inline std::optional<std::vector<OptionSpec>> no_options() { return std::vector<OptionSpec>{}; }

namespace detail {

// A plugin's extension chain (dlhost_device.h), built once by the entry and living as long as
// the library: every extension the kit publishes for the plugin is linked in here.
class ExtensionChain {
 public:
  // Publishes `specs` as DLHOST_EXT_OPTION_SCHEMA (an empty list is a declaration too: the
  // plugin reads no option of its own).
  void declare_options(std::vector<OptionSpec> specs) {
    specs_ = std::move(specs);
    decls_.reserve(specs_.size());
    for (const OptionSpec& o : specs_) {
      auto d = make_struct<dlhost_option_decl>(DLHOST_OPTION_DECL_STRUCT_SIZE);
      d.name = o.name;
      d.type = o.type;
      d.default_value = o.default_value;
      d.help = o.help;
      d.choices = o.choices;
      decls_.push_back(d);
    }
    for (const auto& d : decls_) pointers_.push_back(&d);
    schema_ = make_struct<dlhost_option_schema_ext>(DLHOST_OPTION_SCHEMA_EXT_STRUCT_SIZE);
    schema_.type = DLHOST_EXT_OPTION_SCHEMA;
    schema_.count = static_cast<int32_t>(pointers_.size());
    schema_.options = pointers_.data();
    link(&schema_);
  }
  // Links a typed extension (one starting with dlhost_extension's fields) that outlives the
  // chain.
  template <class Ext>
  void link(Ext* ext) {
    ext->next = head_;
    head_ = reinterpret_cast<const dlhost_extension*>(ext);
  }
  const dlhost_extension* head() const { return head_; }

 private:
  std::vector<OptionSpec> specs_;
  std::vector<dlhost_option_decl> decls_;
  std::vector<const dlhost_option_decl*> pointers_;
  dlhost_option_schema_ext schema_{};
  const dlhost_extension* head_ = nullptr;
};

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
  if (host != nullptr && host->struct_size >= DLHOST_HOST_API_STRUCT_SIZE_1_0 &&
      host->abi_major != DLHOST_ABI_MAJOR) {
    // A host of another major: only the table's first fields, which never move, are filled, so
    // that the host refuses the plugin naming both versions ("built against dlhost ABI X.Y")
    // rather than seeing NULL and guessing. Nothing of the host is called.
    static dlhost_plugin identity = make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
    identity.abi_major = DLHOST_ABI_MAJOR;
    identity.abi_minor = DLHOST_ABI_MINOR;
    identity.name = info.name;
    return &identity;
  }
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

// The chain a backend's link_extensions() hangs its own typed extensions on.
using ExtensionChain = detail::ExtensionChain;

}  // namespace dlhost::sdk

#endif  // DLHOST_PLUGIN_KIT_HPP
