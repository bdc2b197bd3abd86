// tool_runtime_kit.hpp — the glue every backend's own distributed runtime (ABI 1.5,
// DLHOST_EXT_TOOL_RUNTIME, dlhost_device.h) writes alike: the extension's table, the info struct
// filled for the host, and the per-step communication times copied out. Used by cpu_libtorch's
// torch_ddp and cpu_tensorflow's tf_collective. Header-only; nothing here crosses the ABI.
// Thread-safety: pure functions.
#ifndef DLHOST_TOOL_RUNTIME_KIT_HPP
#define DLHOST_TOOL_RUNTIME_KIT_HPP

#include <string>
#include <vector>

#include "dlhost/dlhost.hpp"
#include "dlhost/dlhost_device.h"

namespace dlhost::sdk {

// The extension's table (struct_size and type set, every other entry NULL) for `runtimes`
// (comma-separated, lives as long as the library); link it into the plugin's chain.
inline dlhost_tool_runtime_ext tool_runtime_extension(
    const char* runtimes, dlhost_status* (*query)(const char*),
    dlhost_status* (*attach)(dlhost_model*, const dlhost_tool_runtime_args*,
                             dlhost_tool_runtime_info*),
    dlhost_status* (*comm_times)(dlhost_model*, double*, size_t, size_t*)) {
  dlhost_tool_runtime_ext e{};
  e.struct_size = DLHOST_TOOL_RUNTIME_EXT_STRUCT_SIZE;
  e.type = DLHOST_EXT_TOOL_RUNTIME;
  e.runtimes = runtimes;
  e.runtime_query = query;
  e.runtime_attach = attach;
  e.runtime_comm_times = comm_times;
  return e;
}

// Fills the fields of the host's `info` that its struct_size covers (NULL: nothing). The strings
// must live as long as the model; `comm_time` says what the comm times measure (then no reason is
// given for their absence).
inline void fill_runtime_info(dlhost_tool_runtime_info* info, const char* mode, const char* library,
                              const char* comm_time) {
  if (info == nullptr) return;
  if (DLHOST_HAS_FIELD(info, dlhost_tool_runtime_info, mode)) info->mode = mode;
  if (DLHOST_HAS_FIELD(info, dlhost_tool_runtime_info, library)) info->library = library;
  if (DLHOST_HAS_FIELD(info, dlhost_tool_runtime_info, comm_time)) info->comm_time = comm_time;
  if (DLHOST_HAS_FIELD(info, dlhost_tool_runtime_info, no_comm_time)) info->no_comm_time = nullptr;
}

// runtime_comm_times' contract: min(capacity, steps) values into `ms`, the number of steps into
// *count; INVALID_ARGUMENT (naming `who`) for a null output.
inline void copy_comm_times(const std::vector<double>& times, double* ms, size_t capacity,
                            size_t* count, const std::string& who) {
  if (count == nullptr || (ms == nullptr && capacity > 0))
    invalid(who + ": runtime_comm_times: null output");
  for (size_t k = 0; k < times.size() && k < capacity; ++k) ms[k] = times[k];
  *count = times.size();
}

}  // namespace dlhost::sdk

#endif  // DLHOST_TOOL_RUNTIME_KIT_HPP
