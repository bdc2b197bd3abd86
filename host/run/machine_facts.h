// machine_facts.h — what the plugin registry knows of this machine for the skip rules
// (suite/skip.h): each backend's GPUs and each comm's memory, read from the plugins themselves
// (query, device_count, device_info, capabilities) in the process that decides, before any rank
// process starts; each rank reads its backend's GPUs again to check its own node. Not
// thread-safe (a lookup may query a plugin, as PluginRegistry::find does).
#pragma once

#include <optional>
#include <string>

#include "core/plugin_registry.h"
#include "suite/skip.h"

namespace dlhost {

// The GPUs a loaded backend reports: devices of kind GPU; none, with the query's reason, when
// its query says it cannot run here (a GPU backend without a driver).
BackendDevices backend_devices(const LoadedPlugin& backend);

// A comm's memory from its capabilities, asked before init; nullopt when its query says it cannot
// run here or its capabilities fail (its case is skipped for that when it runs).
std::optional<CommMemory> comm_memory(const LoadedPlugin& comm);

// The facts of the plugins in `registry` (which must outlive the result), queried lazily: only
// the backends and comms the cases name.
MachineFacts machine_facts(const PluginRegistry& registry, int cores);

}  // namespace dlhost
