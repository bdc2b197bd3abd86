// environment.cpp — see environment.h. Reads /proc and uname; nothing here is cached between
// calls except by the caller.
#include "core/environment.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "dlhost/cpu_info.hpp"
#include "git_revision.h"

namespace dlhost {

std::string temp_folder() {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string folder = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec))
    throw std::runtime_error(
        (tmpdir != nullptr && *tmpdir != '\0' ? "TMPDIR=" + folder : folder) +
        (std::filesystem::exists(folder, ec) ? " is not a directory" : " does not exist") +
        ": dlhost keeps temporary files there; set TMPDIR to an existing directory");
  return folder;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    throw std::runtime_error(std::string("cannot find the dlhost binary: ") + std::strerror(errno));
  buf[n] = '\0';
  return buf;
}

std::string dlhost_version() { return DLHOST_VERSION; }
std::string dlhost_git_revision() { return DLHOST_GIT_REVISION; }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

int host_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

uint64_t host_memory_bytes() {
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::string cpu_governor(const std::string& cpu_sysfs) {
  static const std::regex cpu_dir("cpu[0-9]+");
  std::set<std::string> seen;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(cpu_sysfs, ec)) {
    if (!std::regex_match(entry.path().filename().string(), cpu_dir)) continue;
    std::ifstream in(entry.path() / "cpufreq" / "scaling_governor");
    std::string governor;
    if (in >> governor) seen.insert(governor);
  }
  std::string out;
  for (const auto& g : seen) out += (out.empty() ? "" : ",") + g;
  return out.empty() ? "unknown" : out;
}

namespace {

std::string os_pretty_name() {
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  }
  return "unknown";
}

// The library file that defines the function at `address`, "" when unknown.
std::string library_of(void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

// The CPU's widest vector ISA in the words OpenBLAS's cores are described with.
std::string vector_isa_name(const std::set<std::string>& flags) {
  auto has = [&](const char* f) { return flags.count(f) != 0; };
  if (has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq")) return "AVX-512";
  if (has("avx2")) return "AVX2";
  if (has("avx")) return "AVX";
  return "SSE";
}

}  // namespace

nlohmann::ordered_json allocator_in_use() {
  // RTLD_DEFAULT finds the first definition in the global scope: a preloaded allocator's.
  const std::string library = library_of(dlsym(RTLD_DEFAULT, "malloc"));
  nlohmann::ordered_json out{{"name", "system"}, {"library", library}, {"version", nullptr}};
  using TcVersion = const char* (*)(int*, int*, const char**);
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  if (library.find("tcmalloc") != std::string::npos) {
    out["name"] = "tcmalloc";
    if (auto v = reinterpret_cast<TcVersion>(dlsym(RTLD_DEFAULT, "tc_version")))
      out["version"] = v(nullptr, nullptr, nullptr);
  } else if (library.find("jemalloc") != std::string::npos) {
    out["name"] = "jemalloc";
    const char* version = nullptr;
    size_t size = sizeof(version);
    if (auto ctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
        ctl != nullptr && ctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr)
      out["version"] = std::string("jemalloc ") + version;
  } else if (library.find("libc.so") == std::string::npos) {
    out["name"] = std::filesystem::path(library).filename().string();
  }
  return out;
}

nlohmann::ordered_json library_dispatch() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  // Only a library already loaded (by a plugin): asking must not load one.
  void* openblas = dlopen("libopenblas.so.0", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (openblas == nullptr) return out;
  using Text = char* (*)();
  auto corename = reinterpret_cast<Text>(dlsym(openblas, "openblas_get_corename"));
  auto config = reinterpret_cast<Text>(dlsym(openblas, "openblas_get_config"));
  if (corename != nullptr) {
    std::string version = config != nullptr ? config() : "";
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words.
    if (size_t sp = version.find(' ', version.find(' ') + 1); sp != std::string::npos)
      version.resize(sp);
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    out.push_back({{"library", "OpenBLAS"},
                   {"version", version},
                   {"path", library_of(reinterpret_cast<void*>(corename))},
                   {"dispatched", corename()},
                   {"cpu_isa", vector_isa_name(sdk::cpu_info().flags)},
                   {"coretype_variable", coretype != nullptr ? nlohmann::ordered_json(coretype)
                                                             : nlohmann::ordered_json(nullptr)}});
  }
  dlclose(openblas);
  return out;
}

nlohmann::ordered_json capture_environment(const PluginRegistry& registry) {
  nlohmann::ordered_json env;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  struct utsname u {};
  uname(&u);
  env["host"] = host;
  env["cpu_model"] = cpu_model();
  env["cores"] = host_cores();
  env["memory_bytes"] = host_memory_bytes();
  env["os"] = os_pretty_name();
  env["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  env["compiler"] = DLHOST_COMPILER;
  env["build_type"] = DLHOST_BUILD_TYPE;
  env["cpu_governor"] = cpu_governor();
  env["dlhost_version"] = dlhost_version();
  env["git_revision"] = dlhost_git_revision();

  nlohmann::ordered_json libraries = nlohmann::ordered_json::object();
  for (const auto& p : registry.plugins()) {
    // Only backends already queried: a case worker describes the backend its case uses and
    // never initializes another one (a GPU driver) just to name its library.
    if (p.kind != DLHOST_PLUGIN_BACKEND || !p.queried || !p.usable) continue;
    const auto* api = p.table->backend;
    if (api->device_count() <= 0) continue;
    const dlhost_device_info* info = nullptr;
    StatusPtr failed(api->device_info(0, &info));
    if (!failed && info != nullptr) {
      libraries[p.name] = info->library != nullptr ? info->library : "";
      if (info->isa != nullptr && info->kind == DLHOST_DEVICE_CPU) env["isa"] = info->isa;
    }
  }
  env["libraries"] = libraries;
  // What this process loaded: a reader can tell which build of each plugin measured the case.
  nlohmann::ordered_json loaded = nlohmann::ordered_json::array();
  for (const auto& p : registry.plugins())
    loaded.push_back(
        {{"name", p.name}, {"kind", kind_name(p.kind)}, {"version", p.version}, {"path", p.path}});
  env["plugins_loaded"] = loaded;

  // Variables that change the numbers; recorded whether set or not.
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  for (const char* name :
       {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OPENBLAS_NUM_THREADS",
        "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_NUM_THREADS", "DNNL_MAX_CPU_ISA",
        "DNNL_VERBOSE", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "MXNET_OMP_MAX_THREADS",
        "MXNET_ENGINE_TYPE", "MXNET_CPU_WORKER_NTHREADS", "GLIBC_TUNABLES",
        "DLHOST_NAMESPACE_ALLOCATOR", "MALLOC_CONF"}) {
    const char* v = std::getenv(name);
    vars[name] = v != nullptr ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
  }
  env["variables"] = vars;
  env["allocator"] = allocator_in_use();
  env["library_dispatch"] = library_dispatch();
  return env;
}

}  // namespace dlhost
