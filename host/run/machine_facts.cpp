// machine_facts.cpp — see machine_facts.h.
#include "run/machine_facts.h"

#include "core/compatibility.h"
#include "core/host_api.h"

namespace dlhost {

BackendDevices backend_devices(const LoadedPlugin& backend) {
  BackendDevices d;
  d.device_memory = (backend_caps(backend).memory_spaces >> DLHOST_MEMORY_DEVICE) & 1u;
  if (!backend.usable) {
    // No device to ask the kind of: where the parameters live says what the backend drives.
    d.gpu = d.device_memory;
    d.why_none = backend.unusable_reason;
    return d;
  }
  const dlhost_backend_api* api = backend.table->backend;
  const int32_t count = api->device_count();
  for (int32_t i = 0; i < count; ++i) {
    const dlhost_device_info* info = nullptr;
    StatusPtr failed(api->device_info(i, &info));
    if (!failed && info != nullptr && info->kind == DLHOST_DEVICE_GPU) ++d.gpus;
  }
  d.gpu = d.gpus > 0 || (count == 0 && d.device_memory);
  if (d.gpus == 0)
    d.why_none = count == 0 ? "it reports no device"
                            : "none of its " + std::to_string(count) + " devices is a GPU";
  return d;
}

std::optional<CommMemory> comm_memory(const LoadedPlugin& comm) {
  if (!comm.usable || comm.table == nullptr || comm.table->comm == nullptr) return std::nullopt;
  dlhost_comm_caps caps{};
  caps.struct_size = DLHOST_COMM_CAPS_STRUCT_SIZE;
  StatusPtr failed(comm.table->comm->capabilities(&caps));
  if (failed) return std::nullopt;
  return CommMemory{caps.device_memory != 0, caps.library != nullptr ? caps.library : ""};
}

MachineFacts machine_facts(const PluginRegistry& registry, int cores) {
  MachineFacts facts;
  facts.cores = cores;
  facts.backend = [&registry](const std::string& name) -> std::optional<BackendDevices> {
    const LoadedPlugin* p = registry.find(DLHOST_PLUGIN_BACKEND, name);
    if (p == nullptr) return std::nullopt;
    return backend_devices(*p);
  };
  facts.comm = [&registry](const std::string& name) -> std::optional<CommMemory> {
    const LoadedPlugin* p = registry.find(DLHOST_PLUGIN_COMM, name);
    if (p == nullptr) return std::nullopt;
    return comm_memory(*p);
  };
  return facts;
}

}  // namespace dlhost
