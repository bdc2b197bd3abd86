// library_dispatch.cpp — see library_dispatch.h.
#include "console/library_dispatch.h"

#include <algorithm>
#include <cctype>

#include "run/runtime_settings.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const char* isa_name(int rank) {
  static const char* const names[] = {"unknown", "SSE", "AVX", "AVX2", "AVX-512"};
  return rank >= 0 && rank <= 4 ? names[rank] : "unknown";
}

std::string text(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// OpenBLAS's core below the CPU's ISA: name the fix (the case key, and the variable it sets).
void openblas_warning(const json& d, const json& record, std::vector<Warning>& out) {
  const std::string core = text(d, "dispatched");
  const int core_rank = openblas_core_rank(core);
  const int cpu_rank = vector_isa_rank(text(d, "cpu_isa"));
  if (core_rank == 0 || cpu_rank == 0 || core_rank >= cpu_rank) return;
  const std::string version = text(d, "version").empty() ? "OpenBLAS" : text(d, "version");
  std::string fix;
  const std::string best = cpu_rank == 4 ? "SkylakeX" : cpu_rank == 3 ? "Haswell" : "Sandybridge";
  const json& params = record.contains("params") ? record["params"] : json::object();
  const std::string key = text(params, "openblas_coretype");
  const std::string variable = text(d, "coretype_variable");
  if (!variable.empty() && (key.empty() || key == "auto"))
    fix = "OPENBLAS_CORETYPE=" + variable + " in the case's environment chose it; ";
  fix += key.empty() || key == "auto"
             ? "`openblas_coretype: auto` should have set OPENBLAS_CORETYPE=" + best +
                   " (the case ran without dlhost's case worker?)"
             : "The case sets `openblas_coretype: " + key + "`; `openblas_coretype: auto` (or " +
                   best + ") sets OPENBLAS_CORETYPE=" + best;
  out.push_back({kWarnLibraryDispatch, version + " dispatched its " + core + " kernels (" +
                                           isa_name(core_rank) + ") on this " + isa_name(cpu_rank) +
                                           " CPU: its GEMMs run " + isa_name(core_rank) +
                                           " code. " + fix});
}

// MXNet's wheel: its own operators built for SSE3 (the library line says so).
void mxnet_warning(const json& record, std::vector<Warning>& out) {
  const json& params = record.contains("params") ? record["params"] : json::object();
  const std::string backend = text(params, "backend");
  const json& env = record.contains("environment") ? record["environment"] : json::object();
  const json& libraries = env.contains("libraries") ? env["libraries"] : json::object();
  const std::string library = text(libraries, backend.c_str());
  if (lower(library).find("kernels sse3") == std::string::npos) return;
  const int cpu_rank = vector_isa_rank(text(env, "isa"));
  if (cpu_rank <= 1) return;
  out.push_back({kWarnLibraryDispatch,
                 backend + ": " + library.substr(0, library.find(" (")) +
                     "'s own operators are compiled for SSE3 (the wheel's widest CPU feature) "
                     "and run as such on this " +
                     isa_name(cpu_rank) +
                     " CPU (its oneDNN and BLAS dispatch on their own). No run-time setting "
                     "changes it: it is fixed when the wheel is built (MXNet built from source "
                     "for this CPU)"});
}

}  // namespace

int vector_isa_rank(const std::string& isa) {
  const std::string s = lower(isa);
  if (s.find("avx512") != std::string::npos || s.find("avx-512") != std::string::npos) return 4;
  if (s.find("avx2") != std::string::npos) return 3;
  if (s.find("avx") != std::string::npos) return 2;
  if (s.find("sse") != std::string::npos) return 1;
  return 0;
}

std::vector<Warning> library_dispatch_warnings(const json& record) {
  std::vector<Warning> out;
  const json& env = record.contains("environment") ? record["environment"] : json::object();
  if (auto it = env.find("library_dispatch"); it != env.end() && it->is_array())
    for (const json& d : *it)
      if (text(d, "library") == "OpenBLAS") openblas_warning(d, record, out);
  mxnet_warning(record, out);
  return out;
}

}  // namespace dlhost
