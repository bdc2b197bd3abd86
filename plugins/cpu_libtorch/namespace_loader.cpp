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
#include <pthread.h>

#include <cstdlib>
#include <string>

#include "dlhost/dlhost_abi.h"
#include "namespace_allocator.h"

namespace {

// pthread keys: the namespace's libc is a second copy with its own table of keys, but the values
// live in the thread descriptor that both copies share, and each copy hands out the lowest free
// key. Left alone, the two sides use the same slots: at exit Debian's libtorch's libGLX (through
// OpenCV) read libgomp's value as its own and crashed. So the new libc first takes the keys below
// kFirstKey, which leaves them to the host's side, and the torch side's keys come after, still
// in the descriptor's first block of 32 (a second-level block would be allocated by one libc's
// malloc and freed by the other's at thread exit).
constexpr unsigned kFirstKey = 16;
using KeyCreate = int (*)(pthread_key_t*, void (*)(void*));

// The real plugin's entry, or nullptr after logging why.
using Entry = const dlhost_plugin* (*)(const dlhost_host_api*);

// With the case's allocator (DLHOST_NAMESPACE_ALLOCATOR: dlhost's runtime settings), the
// namespace is opened with that library as its first object (namespace_allocator.h says why and
// how). The allocator's initializer takes a pthread key of the new libc before anything here
// runs, so the low keys cannot be set aside in the new libc as below; dlhost's case worker sets
// keys 0-15 aside in the default namespace instead, before any initializer (host/app/main.cpp),
// and the two sides swap: the namespace uses 0-15, the host's side 16 up.
constexpr unsigned kLastKey = 32;  // the descriptor's first block of keys

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
  const char* allocator = std::getenv("DLHOST_NAMESPACE_ALLOCATOR");
  if (allocator != nullptr && *allocator == '\0') allocator = nullptr;
  std::string why, heap;
  void* first = dlhost::torch_namespace::open_namespace(allocator, &why, &heap);
  if (!heap.empty()) host->log(DLHOST_LOG_WARN, DLHOST_TORCH_PLUGIN_NAME, heap.c_str());
  Lmid_t space = 0;
  if (first == nullptr || dlinfo(first, RTLD_DI_LMID, &space) != 0) return fail(why);
  void* libc = dlmopen(space, "libc.so.6", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  auto key_create =
      reinterpret_cast<KeyCreate>(libc != nullptr ? dlsym(libc, "pthread_key_create") : nullptr);
  if (key_create == nullptr) return fail("the namespace's libc has no pthread_key_create");
  for (pthread_key_t key = 0; allocator == nullptr && key + 1 < kFirstKey;)
    if (key_create(&key, nullptr) != 0)
      return fail("cannot set the namespace's pthread keys apart");
  void* inner = dlmopen(space, path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (inner == nullptr) return fail(std::string("dlmopen: ") + dlerror());
  // Measured: the host's side holds ~10 keys (dlhost conform, every plugin loaded), the torch
  // side 3 after loading and 7 after training (and the allocator's one). A host side already at
  // kFirstKey, or (with an allocator) a host side that did not start at kFirstKey, would share
  // slots: refuse rather than corrupt.
  pthread_key_t host_next = 0, torch_next = 0;
  const bool apart =
      pthread_key_create(&host_next, nullptr) == 0 && key_create(&torch_next, nullptr) == 0 &&
      (allocator == nullptr
           ? host_next < kFirstKey && torch_next < 24
           : host_next >= kFirstKey && host_next < kLastKey - 4 && torch_next < kFirstKey - 8);
  if (!apart)
    return fail(std::string("the pthread keys of the two namespaces would overlap (host side ") +
                std::to_string(host_next) + ", torch side " + std::to_string(torch_next) +
                (allocator != nullptr ? "; with DLHOST_NAMESPACE_ALLOCATOR the host process "
                                        "must set keys 0-15 aside, as dlhost's case worker does)"
                                      : ")"));
  pthread_key_delete(host_next);  // the torch side's probe key stays taken: one slot
  auto entry = reinterpret_cast<Entry>(dlsym(inner, DLHOST_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) return fail(path + " has no " DLHOST_PLUGIN_ENTRY_SYMBOL);
  return entry;
}

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  static const Entry entry = load(host);
  return entry != nullptr ? entry(host) : nullptr;
}
