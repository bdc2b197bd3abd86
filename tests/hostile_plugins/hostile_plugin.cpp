// hostile_plugin.cpp — a test fixture: a plugin that breaks the process loading it, built once per
// fault (HOSTILE_FAULT) into its own folder, for reliability_e2e.sh. Discovery must list each as
// refused with what it did, and every other plugin and subcommand must work as before:
//   1 junk_pointer   the entry returns a pointer into nowhere
//   2 null_functions a correctly sized backend table whose function pointers are all NULL
//   3 exit_entry     exit(0) in the entry
//   4 exit_ctor      exit(0) in a library constructor (before the entry is ever called)
//   5 abort_entry    abort() in the entry
//   6 throw_entry    an exception escapes the entry (the message must name it, with its what())
//   7 said_abort     says why on stderr, then abort(): the refusal must quote what it said
//   8 hang_entry     never returns from its entry: refused as hung once, and remembered
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "dlhost/dlhost.h"

#if HOSTILE_FAULT == 4
namespace {
[[gnu::constructor]] void leave_at_load() { std::exit(0); }
}  // namespace
#endif

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api*) {
#if HOSTILE_FAULT == 1
  return reinterpret_cast<const dlhost_plugin*>(static_cast<uintptr_t>(0x10));
#elif HOSTILE_FAULT == 3
  std::exit(0);
#elif HOSTILE_FAULT == 5
  std::abort();
#elif HOSTILE_FAULT == 6
  throw std::runtime_error("acme: licence file not found");
#elif HOSTILE_FAULT == 7
  std::fprintf(stderr, "acme: cannot find libacme_rt.so.3\n");
  std::abort();
#elif HOSTILE_FAULT == 8
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
#else
  static dlhost_backend_api table{};  // every function NULL
  table.struct_size = DLHOST_BACKEND_API_STRUCT_SIZE;
  // In field order: struct_size, abi_major, abi_minor, kind, name, version, description, query,
  // backend.
  static dlhost_plugin plugin{DLHOST_PLUGIN_STRUCT_SIZE,
                              DLHOST_ABI_MAJOR,
                              DLHOST_ABI_MINOR,
                              DLHOST_PLUGIN_BACKEND,
                              "hostile",
                              nullptr,
                              nullptr,
                              nullptr,
                              &table};
  return &plugin;
#endif
}
