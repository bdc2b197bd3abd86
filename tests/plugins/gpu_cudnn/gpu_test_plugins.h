// gpu_test_plugins.h — the plugins the gpu_cudnn tests load: gpu_cudnn and, as the oracle of the
// Transformer tests, cpu_reference, both from one folder and one registry (plugins are never
// unloaded). DLHOST_GPU_CUDNN_PLUGIN overrides the build's path: scripts/gpu-check.sh runs the
// tests from a bundle on the lent GPU machine, where the build folder does not exist and
// cpu_reference lies beside gpu_cudnn.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/plugin_registry.h"

namespace dlhost::gpu_test {

inline std::string plugin_dir() {
  const char* path = std::getenv("DLHOST_GPU_CUDNN_PLUGIN");
  if (path == nullptr) return DLHOST_TEST_PLUGIN_DIR;
  const std::string p(path);
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// `name`'s backend plugin (gpu_cudnn or cpu_reference), loaded on first use.
inline const LoadedPlugin& backend_plugin(const std::string& name) {
  static PluginRegistry* registry = new PluginRegistry();
  if (const LoadedPlugin* p = registry->find(DLHOST_PLUGIN_BACKEND, name)) return *p;
  const char* override_path = std::getenv("DLHOST_GPU_CUDNN_PLUGIN");
  registry->load_file(name == "gpu_cudnn" && override_path != nullptr
                          ? std::string(override_path)
                          : plugin_dir() + "/libdlhost_" + name + ".so");
  if (const LoadedPlugin* p = registry->find(DLHOST_PLUGIN_BACKEND, name)) return *p;
  std::string why = name + " not loaded";
  for (const auto& r : registry->refused()) why += "; " + r.path + ": " + r.reason;
  throw std::runtime_error(why);
}

}  // namespace dlhost::gpu_test
