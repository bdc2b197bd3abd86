// build_plugin.h — a plugin of this build's plugins/ folder for a test executable: loaded on
// first use from DLHOST_TEST_PLUGIN_DIR/libdlhost_<name>.so and kept (plugins are never unloaded),
// or an exception that says why the registry refused it.
// Thread-safety: none; a test executable asks from its main thread.
#pragma once

#include <stdexcept>
#include <string>

#include "core/plugin_registry.h"

namespace dlhost::test_plugins {

inline const LoadedPlugin& build_plugin(dlhost_plugin_kind kind, const std::string& name) {
  static auto* registry = new PluginRegistry();
  if (const LoadedPlugin* p = registry->find(kind, name)) return *p;
  registry->load_file(std::string(DLHOST_TEST_PLUGIN_DIR) + "/libdlhost_" + name + ".so");
  if (const LoadedPlugin* p = registry->find(kind, name)) return *p;
  std::string why = name + " plugin not loaded";
  for (const auto& r : registry->refused()) why += "; " + r.path + ": " + r.reason;
  throw std::runtime_error(why);
}

}  // namespace dlhost::test_plugins
