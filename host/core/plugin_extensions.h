// plugin_extensions.h — the host's typed view of a plugin's ABI 1.2 extensions
// (dlhost_device.h): resolved once when the plugin is loaded, by walking its extension chain,
// with every struct_size checked, and only for plugins that say they speak 1.2 (a 1.0 or 1.1
// plugin's chain was "future" and is ignored). Also the declared option schema and the check of
// a case's options against it. Pure functions over plugin-owned tables; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dlhost/dlhost.h"

namespace dlhost {

struct PluginExtensions {
  const dlhost_backend_caps_ext* caps = nullptr;
  const dlhost_stream_ext* stream = nullptr;
  const dlhost_events_ext* events = nullptr;
  const dlhost_device_memory_ext* memory = nullptr;
  const dlhost_option_schema_ext* option_schema = nullptr;
  const dlhost_comm_group_ext* group = nullptr;
  const dlhost_comm_abort_ext* abort = nullptr;
  const dlhost_tensor_read_ext* tensor_read = nullptr;  // 1.3
};

// Walks `plugin.extensions` when the plugin speaks ABI 1.2 or later; an extension whose
// struct_size is shorter than its 1.2 layout is ignored, as if absent. Throws std::runtime_error
// naming the extension when the chain is cyclic or absurdly long (a broken plugin).
PluginExtensions resolve_extensions(const dlhost_plugin& plugin);

struct OptionDecl {
  std::string name;
  int32_t type = DLHOST_OPTION_STRING;  // dlhost_option_type
  std::optional<std::string> default_value;
  std::string help;
  std::vector<std::string> choices;  // DLHOST_OPTION_ENUM; for DLHOST_OPTION_INT, "MIN..MAX"
};

const char* option_type_name(int32_t type);

// The options a plugin declares; empty when it declares none (then its options cannot be
// checked: the caller says so).
std::vector<OptionDecl> declared_options(const PluginExtensions& ext);

// Checks a case's options for one plugin against its declarations. Returns one message naming
// the plugin, the option and what is wrong ("did you mean" for a near miss), or nullopt when
// every option is declared and well-typed.
std::optional<std::string> check_options(const std::string& plugin,
                                         const std::vector<OptionDecl>& declared,
                                         const std::map<std::string, std::string>& given);

}  // namespace dlhost
