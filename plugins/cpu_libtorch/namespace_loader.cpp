// namespace_loader.cpp — the file the host loads as cpu_libtorch2: it loads the real plugin (this
// folder's sources built against the PyPI libtorch, in <plugins>/cpu_libtorch2.d/) into a link-map
// namespace of its own with dlmopen and hands the host that plugin's table.
//
// Why: two libtorch builds cannot share a namespace, RTLD_LOCAL or not. libtorch_cpu.so and
// libc10.so define dozens of STB_GNU_UNIQUE symbols (the statics of inline functions, such as
// c10::Dispatcher::singleton()'s), which the dynamic linker binds once per namespace: loaded
// after Debian's 1.13, libtorch 2.x's static constructors register into 1.13's dispatcher and
// crash (and the other way round). `dlhost plugins`, the plugin probe and `dlhost conform` load
// every plugin into one process, so without this cpu_libtorch2 is refused wherever cpu_libtorch
// is built. In its own namespace libtorch 2.x gets its own libstdc++, libgomp and libc; the ABI
// between host and plugin is C function tables, which cross namespaces unchanged.
// Thread-safety: the host calls the entry from one thread; the namespace is made once per process.
#include <dlfcn.h>

#include <string>

#include "dlhost/dlhost_abi.h"

namespace {

// The real plugin's entry, or nullptr after logging why.
using Entry = const dlhost_plugin* (*)(const dlhost_host_api*);
Entry load(const dlhost_host_api* host) {
  auto fail = [host](const std::string& why) -> Entry {
    host->log(DLHOST_LOG_ERROR, DLHOST_TORCH_PLUGIN_NAME, why.c_str());
    return nullptr;
  };
  // The real plugin's path is relative to this file's folder, so the build tree and an install
  // both work.
  Dl_info self{};
  if (dladdr(reinterpret_cast<const void*>(&load), &self) == 0 || self.dli_fname == nullptr)
    return fail("cannot find its own file (dladdr)");
  std::string path = self.dli_fname;
  path.erase(path.rfind('/') + 1);
  path += DLHOST_TORCH_INNER_PLUGIN;
  void* inner = dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (inner == nullptr) return fail(std::string("dlmopen: ") + dlerror());
  auto entry = reinterpret_cast<Entry>(dlsym(inner, DLHOST_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) return fail(path + " has no " DLHOST_PLUGIN_ENTRY_SYMBOL);
  return entry;
}

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  static const Entry entry = load(host);
  return entry != nullptr ? entry(host) : nullptr;
}
