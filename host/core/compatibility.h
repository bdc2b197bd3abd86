// compatibility.h — what the host may hand a plugin, decided from the ABI minor the plugin speaks
// and the capabilities it publishes: the 1.1 ops and attributes a 1.0 backend cannot see, the
// precision modes a backend implements (fp32 alone without capabilities), and the options a
// plugin declares. Each answer is a reason a user can act on, or nothing; the handles
// (handles.h) turn a reason into UNIMPLEMENTED, which a case records as SKIPPED.
// Pure functions over plugin-owned tables; thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dlhost/dlhost.h"

struct dlhost_options;

namespace dlhost {

struct LoadedPlugin;

// The first op or attribute of `graph` that needs a newer ABI minor than `backend` speaks:
// "backend compat_v1_0 implements ABI 1.0; op batch_norm (node bn1) needs 1.1".
std::optional<std::string> abi_gap(const LoadedPlugin& backend, const dlhost_graph& graph);

// A backend's capabilities as the host reads them: published (ABI 1.2 DLHOST_EXT_BACKEND_CAPS),
// or the assumption for a backend without them (fp32, F32/I32 tensors, every op its ABI minor
// has, host memory).
struct BackendCaps {
  bool published = false;
  std::vector<int32_t> ops;
  uint32_t dtypes = 0, precisions = 0, memory_spaces = 0;
  bool asynchronous = false;
  uint32_t optimizers = 0;  // bit (1 << dlhost_optimizer_kind); SGD alone before ABI 1.4
};
BackendCaps backend_caps(const LoadedPlugin& backend);

// The precision modes (dlhost_precision) by name, as suites and options spell them.
const std::vector<std::string>& precision_names();
std::string caps_precisions_text(const BackendCaps& caps);

// Why `backend` cannot run `precision` here ("backend X implements precision fp32 only; the case
// asks for bf16"), or nothing.
std::optional<std::string> precision_gap(const LoadedPlugin& backend, const std::string& precision);
// An op of `graph` the backend's published capabilities do not list, or nothing.
std::optional<std::string> ops_gap(const LoadedPlugin& backend, const dlhost_graph& graph);

// "sgd", "adamw": a dlhost_optimizer_kind as suites spell it.
const char* optimizer_name(int32_t kind);
// Why `backend` cannot update with optimizer `kind` (its capabilities lack it), or nothing.
std::optional<std::string> optimizer_gap(const LoadedPlugin& backend, int32_t kind);

// The host-set keys every backend gets besides "threads" and "seed": "precision" from the case's
// `precision` (fp32 when unset) and, for fp16, "loss_scale" ("0" = dynamic when unset).
void add_precision_options(const nlohmann::ordered_json& params, dlhost_options& options);

// Keys the host sets itself; a plugin never declares them and a suite never gives them.
bool is_host_set_option(const std::string& key);

// Whether the host may tell a backend (compile option "fused_step" = "1", ABI 1.4) that nothing
// reads or changes the gradient buffers between backward and update, so the plugin may do the
// whole step in one call. `mode` is the case key fused_step (auto|off).
bool fused_step_allowed(uint32_t plugin_minor, const std::string& mode, int64_t world_size,
                        const std::string& comm, bool gradient_reader);

// Whether the backend fused the step it was allowed to (the record's timing.fused_step): what a
// plugin of minor 5 or later says in model_info's fused_step (`info` as the plugin filled it);
// an older plugin, which cannot say, is taken as fused whenever it was allowed.
bool step_was_fused(uint32_t plugin_minor, bool allowed, const dlhost_model_info& info);

// Where the backend says its model is knowingly faster than the framework's own users get it
// (model_info's departures, minor 5 or later): one entry a non-blank line; none from an older
// plugin, which cannot say.
std::vector<std::string> departures_of(uint32_t plugin_minor, const dlhost_model_info& info);

// Checks one option a suite gives `plugin_name` against every loaded plugin of that name that
// declares its options (ABI 1.2); nothing when it is fine or no such plugin declares any.
class PluginRegistry;
std::optional<std::string> check_plugin_option(const PluginRegistry& registry,
                                               const std::string& plugin_name,
                                               const std::string& option, const std::string& value);

}  // namespace dlhost
