// environment.h — what a result must carry to be comparable later: host, CPU, memory, OS,
// compiler, dlhost version and revision, library versions and the environment variables that
// change performance (threads, allocator, OpenBLAS/oneDNN knobs). Thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dlhost {

class PluginRegistry;

std::string cpu_model();
int host_cores();  // cores this process may run on (affinity mask)
uint64_t host_memory_bytes();
// The CPU frequency scaling governor of the machine's CPUs under `cpu_sysfs`
// (cpuN/cpufreq/scaling_governor): "performance", "powersave", ...; the distinct values joined by
// "," when CPUs differ; "unknown" where cpufreq is not exposed (most VMs and containers).
std::string cpu_governor(const std::string& cpu_sysfs = "/sys/devices/system/cpu");

// The malloc this process's default namespace runs on, found by where `malloc` resolves:
// {"name": system|tcmalloc|jemalloc|<file>, "library": path, "version": ...}.
nlohmann::ordered_json allocator_in_use();

// What the BLAS libraries loaded in this process dispatched, for the record (library_dispatch.h
// reads it): OpenBLAS (libopenblas.so.0, when loaded) with its version, the core it runs
// (openblas_get_corename()) and the CPU's vector ISA. An empty array when none is loaded.
nlohmann::ordered_json library_dispatch();

// Captured once per run; plugin libraries (backends' device info, comms' library) included.
nlohmann::ordered_json capture_environment(const PluginRegistry& registry);

// The folder for temporary files: TMPDIR when set, else /tmp. Throws std::runtime_error naming
// TMPDIR when it is not an existing directory (std::filesystem said only "temp_directory_path:
// No such file or directory").
std::string temp_folder();

// The current time as a results file records it: "2026-12-05T16:48:48Z".
std::string utc_now();

// This dlhost binary's path (/proc/self/exe), for starting it again as a worker or a rank.
// Throws std::runtime_error when it cannot be read.
std::string self_exe();

std::string dlhost_version();
std::string dlhost_git_revision();

}  // namespace dlhost
