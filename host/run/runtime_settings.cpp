// runtime_settings.cpp — see runtime_settings.h. The table of the frameworks' settings is
// runtime_settings(); the keys' settings (allocator, OpenBLAS core, OpenMP wait policy) follow
// it in case_environment().
#include "run/runtime_settings.h"

#include <strings.h>

#include <cstdlib>
#include <filesystem>
#include <map>

namespace dlhost {

using json = nlohmann::ordered_json;

namespace {

// The library of each allocator, as Debian installs it (libtcmalloc-minimal4, libjemalloc2).
const std::map<std::string, std::string>& allocator_files() {
  static const std::map<std::string, std::string> files = {{"tcmalloc", "libtcmalloc_minimal.so.4"},
                                                           {"jemalloc", "libjemalloc.so.2"}};
  return files;
}

// What the preloaded allocator needs of glibc: both are built with initial-exec TLS, and a
// second copy loaded into a link-map namespace of its own (cpu_libtorch2's) takes its TLS from
// the static TLS surplus, which jemalloc's alone exceeds at glibc's default of 512 bytes
// ("cannot allocate memory in static TLS block"; measured with dlmopen, glibc 2.36).
constexpr const char* kStaticTlsTunable = "glibc.rtld.optional_static_tls=16384";

// A sanitizer's runtime replaces malloc and must come first in the process: a preloaded
// allocator would make it refuse to start ("ASan runtime does not come first").
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerMalloc = true;
#else
constexpr bool kSanitizerMalloc = false;
#endif

std::string with_threads(std::string value, int64_t threads) {
  const std::string mark = "{threads}";
  for (size_t at; (at = value.find(mark)) != std::string::npos;)
    value.replace(at, mark.size(), std::to_string(threads));
  return value;
}

bool applies_to(const RuntimeSetting& s, const std::string& backend) {
  return std::string(s.backends) == "*" || backend == s.backends;
}

// `value` appended to a ':'-separated list `list` (GLIBC_TUNABLES, LD_PRELOAD), unless there.
std::string appended(const char* list, const std::string& value) {
  const std::string have = list != nullptr ? list : "";
  if (have.empty()) return value;
  if ((":" + have + ":").find(":" + value + ":") != std::string::npos) return have;
  return have + ":" + value;
}

}  // namespace

// The frameworks' own guides, for the backends that run them. A later row for one backend
// replaces an earlier row for every backend ("*") of the same variable. Intel OpenMP's KMP_*
// variables are absent on purpose: every library here (oneDNN, both libtorch builds, MXNet's and
// TensorFlow's wheels) runs GNU OpenMP (libgomp), which does not read them.
const std::vector<RuntimeSetting>& runtime_settings() {
  static const std::vector<RuntimeSetting> table = {
      {"*", "OMP_NUM_THREADS", "{threads}",
       "every guide: OpenMP's team size equal to the threads the case uses"},
      {"*", "MKL_NUM_THREADS", "{threads}", "MKL (libtorch 2.x's BLAS) reads its own"},
      {"*", "OPENBLAS_NUM_THREADS", "{threads}",
       "OpenBLAS's own pool (libtorch 1.13, cpu_reference) beside OpenMP's"},
      {"cpu_mxnet", "OMP_NUM_THREADS", "",
       "MXNet: with OMP_NUM_THREADS set MXNet ignores its cap for oneDNN; the cap is "
       "MXNET_OMP_MAX_THREADS"},
      {"cpu_mxnet", "MXNET_OMP_MAX_THREADS", "{threads}",
       "MXNet's OpenMP cap, read when the library loads"},
      {"cpu_mxnet", "MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice",
       "MXNet's default engine, what Gluon users run"},
      {"cpu_mxnet", "MXNET_CPU_WORKER_NTHREADS", "1", "MXNet's default: one CPU engine worker"},
  };
  return table;
}

std::vector<std::string> allocator_folders() {
  if (const char* path = std::getenv("DLHOST_ALLOCATOR_PATH"); path != nullptr) {
    std::vector<std::string> folders;
    std::string rest = path;
    for (size_t at; (at = rest.find(':')) != std::string::npos; rest.erase(0, at + 1))
      folders.push_back(rest.substr(0, at));
    folders.push_back(rest);
    return folders;
  }
  return {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
          "/usr/local/lib"};
}

std::string find_allocator_library(const std::string& name,
                                   const std::vector<std::string>& folders) {
  auto file = allocator_files().find(name);
  if (file == allocator_files().end()) return "";
  std::error_code ec;
  for (const std::string& folder : folders) {
    if (folder.empty()) continue;
    const std::filesystem::path path = std::filesystem::path(folder) / file->second;
    if (std::filesystem::exists(path, ec)) return path.string();
  }
  return "";
}

AllocatorChoice choose_allocator(const CaseParams& params,
                                 const std::vector<std::string>& folders) {
  AllocatorChoice a;
  a.requested = params.allocator;
  if (a.requested == "system" || kSanitizerMalloc) {
    a.name = "system";
    if (a.requested != "system" && a.requested != "auto")
      a.skip_reason = "allocator " + a.requested +
                      ": this dlhost is built with a sanitizer, whose runtime replaces malloc";
    return a;
  }
  const std::string wanted = a.requested == "auto" ? "tcmalloc" : a.requested;
  a.library = find_allocator_library(wanted, folders);
  if (!a.library.empty()) {
    a.name = wanted;
    return a;
  }
  a.name = "system";
  if (a.requested != "auto") {
    std::string searched;
    for (const std::string& f : folders) searched += (searched.empty() ? "" : ", ") + f;
    a.skip_reason = "allocator " + wanted + ": " + allocator_files().at(wanted) +
                    " is not installed here (searched " + searched + "; Debian: apt-get install " +
                    (wanted == "tcmalloc" ? "libtcmalloc-minimal4" : "libjemalloc2") + ")";
  }
  return a;
}

int openblas_core_rank(const std::string& core) {
  static const std::map<std::string, int> ranks = {
      {"Prescott", 1},      {"Core2", 1},      {"Penryn", 1},      {"Dunnington", 1},
      {"Nehalem", 1},       {"Atom", 1},       {"Barcelona", 1},   {"Opteron", 1},
      {"Opteron(SSE3)", 1}, {"Nano", 1},       {"Athlon", 1},      {"Katmai", 1},
      {"Coppermine", 1},    {"Northwood", 1},  {"Banias", 1},      {"Sandybridge", 2},
      {"Bulldozer", 2},     {"Piledriver", 2}, {"Steamroller", 2}, {"Haswell", 3},
      {"Zen", 3},           {"Excavator", 3},  {"SkylakeX", 4},    {"Cooperlake", 4},
      {"SapphireRapids", 4}};
  for (const auto& [name, rank] : ranks)
    if (strcasecmp(name.c_str(), core.c_str()) == 0) return rank;
  return 0;
}

std::string openblas_core_for(const std::set<std::string>& flags) {
  auto has = [&](const char* f) { return flags.count(f) != 0; };
  if (has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq")) return "SkylakeX";
  if (has("avx2") && has("fma")) return "Haswell";
  if (has("avx")) return "Sandybridge";
  return "";
}

std::string openblas_coretype_setting(const std::string& key_value,
                                      const std::set<std::string>& flags) {
  return key_value == "auto" ? openblas_core_for(flags) : key_value;
}

CaseEnvironment case_environment(const CaseParams& params, const std::vector<std::string>& folders,
                                 const std::set<std::string>& cpu_flags) {
  CaseEnvironment env;
  const std::string& backend = params.backend;
  const int64_t threads = params.threads;
  std::map<std::string, std::string> chosen;  // variable -> value ("" unsets)
  std::vector<std::string> order;
  auto put = [&](const std::string& variable, const std::string& value) {
    if (!chosen.count(variable)) order.push_back(variable);
    chosen[variable] = value;
  };
  for (const RuntimeSetting& s : runtime_settings()) {
    if (!applies_to(s, backend)) continue;
    const std::string value = s.value;
    // Threads 0 is the backend's own default: the variable stays as inherited.
    if (value.find("{threads}") != std::string::npos && threads <= 0) continue;
    put(s.variable, with_threads(value, threads));
  }
  if (std::string core = openblas_coretype_setting(params.openblas_coretype, cpu_flags);
      !core.empty())
    put("OPENBLAS_CORETYPE", core);
  if (const std::string& policy = params.omp_wait_policy; policy != "inherit")
    put("OMP_WAIT_POLICY", policy == "passive" ? "PASSIVE" : "ACTIVE");
  env.allocator = choose_allocator(params, folders);
  if (!env.allocator.library.empty()) {
    put("LD_PRELOAD", appended(std::getenv("LD_PRELOAD"), env.allocator.library));
    // PyTorch's launcher (torch.backends.xeon.run_cpu, 2.x) sets this for jemalloc.
    if (env.allocator.name == "jemalloc")
      put("MALLOC_CONF", "oversize_threshold:1,background_thread:true,metadata_thp:auto");
    put("DLHOST_NAMESPACE_ALLOCATOR", env.allocator.library);
    put("GLIBC_TUNABLES", appended(std::getenv("GLIBC_TUNABLES"), kStaticTlsTunable));
  } else {
    // The parent's own preload (a user's) stays; a namespace allocator never leaks into a case
    // on the system allocator.
    put("DLHOST_NAMESPACE_ALLOCATOR", "");
  }
  for (const std::string& v : order) {
    if (chosen[v].empty())
      env.unset.push_back(v);
    else
      env.set.emplace_back(v, chosen[v]);
  }
  return env;
}

json case_environment_json(const CaseEnvironment& env) {
  json set = json::object();
  for (const auto& [k, v] : env.set) set[k] = v;
  return json{{"set", set},
              {"unset", env.unset},
              {"allocator",
               {{"requested", env.allocator.requested},
                {"name", env.allocator.name},
                {"library", env.allocator.library},
                {"skip_reason", env.allocator.skip_reason}}}};
}

}  // namespace dlhost
