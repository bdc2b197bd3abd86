// plugin_registry.h — finds, loads and keeps every dlhost plugin of the process.
//
// Plugins are loaded with Boost.DLL (RTLD_NOW | RTLD_LOCAL) and never unloaded: CUDA, NCCL and
// MPI start threads and keep TLS, and every pointer a plugin hands out lives only while its
// library does. A file that cannot be used is refused with its path and the reason, and the
// others still load. Not thread-safe: load from one thread, then read from any.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlhost/dlhost.h"

namespace dlhost {

struct LoadedPlugin {
  std::string path;
  const dlhost_plugin* table = nullptr;
  std::string name, version, description;
  dlhost_plugin_kind kind = DLHOST_PLUGIN_BACKEND;
  uint32_t abi_major = 0, abi_minor = 0;
  bool usable = true;           // the plugin's query() said so
  std::string unusable_reason;  // when not usable
  int32_t priority = 0;
};

struct RefusedPlugin {
  std::string path;
  std::string reason;
};

const char* kind_name(int32_t kind);

class PluginRegistry {
 public:
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // The folders searched, in order: the build's plugin folder, each entry of DLHOST_PLUGIN_PATH
  // (':'-separated), the install folder. Missing folders are skipped.
  static std::vector<std::string> default_search_path();

  // Says which files must not be loaded into this process (a probe in a child process, see
  // isolate/plugin_probe.h), with why; they are refused without being opened.
  using Vetter = std::function<std::vector<RefusedPlugin>(const std::vector<std::string>& files)>;
  // Loads every shared library (*.so) in each folder (not recursive), in name order, except
  // those `vet` refuses.
  void discover(const std::vector<std::string>& folders, const Vetter& vet = {});
  // Loads one file; returns false and records a refusal when it cannot be used. A plugin whose
  // kind and name are already loaded is refused as a duplicate (the first one found wins).
  bool load_file(const std::string& path);

  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<RefusedPlugin>& refused() const { return refused_; }

  const LoadedPlugin* find(dlhost_plugin_kind kind, const std::string& name) const;
  std::vector<std::string> names(dlhost_plugin_kind kind) const;
  // The usable plugin of `kind` with the highest priority (the first found among equals); NULL
  // when none is usable. What a suite that leaves `backend` unset runs on.
  const LoadedPlugin* highest_priority(dlhost_plugin_kind kind) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<LoadedPlugin> plugins_;
  std::vector<RefusedPlugin> refused_;
};

}  // namespace dlhost
