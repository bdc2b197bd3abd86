// cpu_info.hpp — the CPU this process runs on, read once: the model name and ISA flags from
// /proc/cpuinfo, the cores this process may use (its affinity mask, which a container or taskset
// may make smaller than the machine) and the physical memory. A CPU backend describes its device
// from it instead of parsing /proc/cpuinfo itself.
//
// Header-only and compiled into the plugin; nothing here crosses the ABI.
// Ownership and thread-safety: cpu_info() parses on its first call (a function-local static, so
// concurrent first calls are safe) and the result lives as long as the library; it is read-only.
#ifndef DLHOST_CPU_INFO_HPP
#define DLHOST_CPU_INFO_HPP

#include <sched.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

namespace dlhost::sdk {

struct CpuInfo {
  std::string model = "unknown CPU";  // "model name" as the vendor writes it
  int32_t cores = 1;                  // CPUs this process may run on
  uint64_t memory_bytes = 0;          // physical memory; 0 when the system does not say
  std::set<std::string> flags;        // ISA flags of the first CPU ("avx2", "avx512f", ...)

  bool has(const std::string& flag) const { return flags.count(flag) != 0; }

  // The widest x86 vector ISA among the flags, in oneDNN's words ("avx512_core", "avx2",
  // "avx", "sse41"), or "generic" when none is known (another architecture, no /proc).
  std::string best_isa() const {
    if (has("avx512f") && has("avx512bw") && has("avx512vl")) return "avx512_core";
    if (has("avx2")) return "avx2";
    if (has("avx")) return "avx";
    if (has("sse4_1")) return "sse41";
    return "generic";
  }
};

namespace detail {

// "key\t: value" -> value, when the line starts with `key`.
inline bool cpuinfo_value(const std::string& line, const char* key, std::string* value) {
  if (line.rfind(key, 0) != 0) return false;
  auto colon = line.find(':');
  if (colon == std::string::npos) return false;
  auto start = line.find_first_not_of(" \t", colon + 1);
  *value = start == std::string::npos ? std::string() : line.substr(start);
  return true;
}

inline CpuInfo read_cpu_info() {
  CpuInfo cpu;
  std::ifstream in("/proc/cpuinfo");
  std::string line, value;
  bool have_model = false, have_flags = false;
  while ((!have_model || !have_flags) && std::getline(in, line)) {
    if (!have_model && cpuinfo_value(line, "model name", &value) && !value.empty()) {
      cpu.model = value;
      have_model = true;
    } else if (!have_flags && cpuinfo_value(line, "flags", &value)) {
      std::istringstream words(value);
      for (std::string flag; words >> flag;) cpu.flags.insert(flag);
      have_flags = true;
    }
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    cpu.cores = CPU_COUNT(&set);
  } else if (std::thread::hardware_concurrency() > 0) {
    cpu.cores = static_cast<int32_t>(std::thread::hardware_concurrency());
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0)
    cpu.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  return cpu;
}

}  // namespace detail

// The CPU, parsed once per library.
inline const CpuInfo& cpu_info() {
  static const CpuInfo cpu = detail::read_cpu_info();
  return cpu;
}

}  // namespace dlhost::sdk

#endif  // DLHOST_CPU_INFO_HPP
