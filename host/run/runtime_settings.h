// runtime_settings.h — the one table of the process settings a case runs under, beside its keys:
// the malloc (`allocator`), OpenBLAS's core (`openblas_coretype`), OpenMP's wait policy
// (`omp_wait_policy`) and the variables each framework's performance guide sets (thread counts,
// MXNet's engine and OpenMP cap). `dlhost run` applies them to the case's own process (the
// worker re-executes itself with them before it loads a plugin: case_worker.cpp), and
// `dlhost case-env` prints the same environment for a peer in bench/, so that dlhost's backend
// and the framework in its own Python run under the same settings (docs/suite-format.md,
// "Runtime settings").
//
// The allocator reaches every backend of the case: LD_PRELOAD for the process's default
// link-map namespace, and DLHOST_NAMESPACE_ALLOCATOR for a backend loaded into a namespace of its
// own (cpu_libtorch2's loader dlmopens it there first, so that namespace's malloc and free are
// the same allocator too; memory never crosses the two namespaces).
//
// Functions of the case's params and the CPU's flags that also read this process's environment
// (LD_PRELOAD and GLIBC_TUNABLES, to add to them; DLHOST_ALLOCATOR_PATH) and whether the
// allocator's library file exists; thread-safe while nothing changes the environment.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "suite/case_params.h"

namespace dlhost {

// The allocator a case runs on.
struct AllocatorChoice {
  std::string requested;    // the case's key: system, tcmalloc, jemalloc, or "auto" when unset
  std::string name;         // what it runs on: system, tcmalloc or jemalloc
  std::string library;      // the library preloaded; "" for system
  std::string skip_reason;  // set when the case named an allocator that is not installed here
};

// Where allocator libraries are looked for: DLHOST_ALLOCATOR_PATH (folders separated by ':', a
// test hook) when set, else the multiarch and plain library folders.
std::vector<std::string> allocator_folders();

// The library file of an allocator (libtcmalloc_minimal.so.4, libjemalloc.so.2) in `folders`,
// or "" when none holds it.
std::string find_allocator_library(const std::string& name,
                                   const std::vector<std::string>& folders);

// The case's allocator: the key's, else (unset, "auto") tcmalloc where installed, else system.
AllocatorChoice choose_allocator(const CaseParams& params, const std::vector<std::string>& folders);

// One row of the table: a variable a framework's guide sets, for the backends it names ("*":
// every backend). `value` may hold {threads}; an empty value unsets the variable.
struct RuntimeSetting {
  const char* backends;
  const char* variable;
  const char* value;
  const char* why;
};
const std::vector<RuntimeSetting>& runtime_settings();

// The OpenBLAS core (OPENBLAS_CORETYPE) whose kernels use the widest vector ISA among `flags`
// (/proc/cpuinfo's): SkylakeX for AVX-512, Haswell for AVX2, Sandybridge for AVX; "" for none.
std::string openblas_core_for(const std::set<std::string>& flags);

// What `openblas_coretype` sets as OPENBLAS_CORETYPE: the named core, or for `auto` the core of
// the CPU's widest vector ISA (so that OpenBLAS never falls back to SSE3 "Prescott" kernels on a
// CPU model it does not know, nor runs an inherited narrower core); "" leaves OpenBLAS's own
// choice (auto on a CPU without AVX).
std::string openblas_coretype_setting(const std::string& key_value,
                                      const std::set<std::string>& flags);

// The vector ISA a core's kernels use, as a rank: 1 SSE, 2 AVX, 3 AVX2, 4 AVX-512; 0 unknown.
int openblas_core_rank(const std::string& core);

// The environment of a case's process: variables to set (in order) and to remove.
struct CaseEnvironment {
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> unset;
  AllocatorChoice allocator;
};

// Everything above for the case's params, on a CPU with `cpu_flags`.
CaseEnvironment case_environment(const CaseParams& params,
                                 const std::vector<std::string>& allocator_folders,
                                 const std::set<std::string>& cpu_flags);

// The same as JSON, as `dlhost case-env` prints it: {"set": {...}, "unset": [...], "allocator":
// {...}}.
nlohmann::ordered_json case_environment_json(const CaseEnvironment& env);

}  // namespace dlhost
