// plugin_registry.h — finds, loads and keeps every dlhost plugin of the process.
//
// Plugins are loaded with Boost.DLL (RTLD_NOW | RTLD_LOCAL) and never unloaded: CUDA, NCCL and
// MPI start threads and keep TLS, and every pointer a plugin hands out lives only while its
// library does. A file that cannot be used is refused with its path and the reason, and the
// others still load. Not thread-safe: load and look up from one thread (a lookup may query).
//
// A plugin's query() runs lazily (ABI 1.2), the first time the plugin is looked up with find()
// or probe(): a case worker initializes only the plugins its case uses (a GPU plugin does not
// start its driver for a CPU-only case). `usable`, `unusable_reason` and `priority` are valid
// once `queried` is true.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/plugin_extensions.h"
#include "dlhost/dlhost.h"

namespace dlhost {

struct LoadedPlugin {
  std::string path;
  const dlhost_plugin* table = nullptr;
  std::string name, version, description;
  dlhost_plugin_kind kind = DLHOST_PLUGIN_BACKEND;
  uint32_t abi_major = 0, abi_minor = 0;
  // The minor both sides speak: the plugin's, or the host's when the host is older (tests). Every
  // 1.1 and 1.2 behaviour is gated on it.
  uint32_t speaks_minor = 0;
  PluginExtensions extensions;      // only for speaks_minor >= 2
  std::vector<OptionDecl> options;  // declared (DLHOST_EXT_OPTION_SCHEMA); empty: not checked
  // How the plugin was compiled (DLHOST_PLUGIN_BUILD_SYMBOL: "optimized=1 ndebug=1 ..."); ""
  // when it does not say (a hand-written table).
  std::string build;
  // True only when the plugin says it was compiled without optimisation.
  bool unoptimized() const { return build.find("optimized=0") != std::string::npos; }
  // Filled by the first find()/probe(): lazily, hence mutable behind the registry's const view.
  mutable bool queried = false;
  mutable bool usable = true;           // the plugin's query() said so
  mutable std::string unusable_reason;  // when not usable
  mutable int32_t priority = 0;
};

struct RefusedPlugin {
  std::string path;
  std::string reason;
};

// A plugin the build left out (configure found no library for it), from the note
// `<name>.left-out` the build wrote beside the plugins it built (cmake/DlhostPyPI.cmake).
struct LeftOutPlugin {
  std::string name, path;
  std::string reason;  // the note's first line, control characters dropped, at most 400 bytes
};

const char* kind_name(int32_t kind);

class PluginRegistry {
 public:
  PluginRegistry();
  // A host that pretends to speak ABI 1.`host_abi_minor` (< DLHOST_ABI_MINOR): its plugins see
  // the older host table and get the older behaviour. For compatibility tests only.
  explicit PluginRegistry(uint32_t host_abi_minor);
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
  // those others could have written (core/plugin_trust.h: refused before `vet` sees them, since
  // vetting loads them too) and those `vet` refuses.
  void discover(const std::vector<std::string>& folders, const Vetter& vet = {});
  // Loads one file; returns false and records a refusal when it cannot be used (one others could
  // have written is refused before it is opened: core/plugin_trust.h). A plugin whose
  // kind and name are already loaded is refused as a duplicate (the first one found wins).
  bool load_file(const std::string& path);

  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<RefusedPlugin>& refused() const { return refused_; }
  // Notes of plugins the build left out, found by discover() in the folders it searched; one per
  // name (the first found), and none for a name that was loaded all the same.
  std::vector<LeftOutPlugin> left_out() const;
  // Why `name` was left out of the build, or "" when no note says so.
  std::string left_out_reason(const std::string& name) const;

  // The plugin of `kind` and `name`, queried (see above); NULL when not loaded.
  const LoadedPlugin* find(dlhost_plugin_kind kind, const std::string& name) const;
  // Runs the plugin's query() once; later calls return at once.
  void probe(const LoadedPlugin& plugin) const;
  // Queries every plugin (listing them), or every plugin of one kind.
  void probe_all() const;
  void probe_kind(dlhost_plugin_kind kind) const;
  std::vector<std::string> names(dlhost_plugin_kind kind) const;
  // The usable plugin of `kind` with the highest priority (the first found among equals); NULL
  // when none is usable. What a suite that leaves `backend` unset runs on. Queries that kind.
  const LoadedPlugin* highest_priority(dlhost_plugin_kind kind) const;

 private:
  // Without querying.
  const LoadedPlugin* lookup(dlhost_plugin_kind kind, const std::string& name) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint32_t host_abi_minor_ = DLHOST_ABI_MINOR;
  std::vector<LoadedPlugin> plugins_;
  std::vector<RefusedPlugin> refused_;
  std::vector<LeftOutPlugin> left_out_;
};

}  // namespace dlhost
