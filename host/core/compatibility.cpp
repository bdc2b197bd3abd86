// compatibility.cpp — see compatibility.h.
#include "core/compatibility.h"

#include <algorithm>

#include "core/host_api.h"
#include "core/plugin_registry.h"

namespace dlhost {

namespace {

// The minor that added the Transformer's ops and AdamW (ABI 1.4).
constexpr uint32_t kTransformerMinor = 4;

// The first ABI minor that has `op`.
uint32_t minor_of_op(int32_t op) {
  if (op >= DLHOST_OP_LAYER_NORM) return kTransformerMinor;
  return op >= DLHOST_OP_BATCH_NORM ? 1u : 0u;
}

std::string abi_text(uint32_t minor) {
  return std::to_string(DLHOST_ABI_MAJOR) + "." + std::to_string(minor);
}

// The minor a node's attributes need beyond its op's: fc's batch_dims other than 1 is 1.1.
uint32_t minor_of_attrs(const dlhost_node& node, std::string* what) {
  if (node.op != DLHOST_OP_FC || node.attrs == nullptr) return 0;
  const auto* fc = static_cast<const dlhost_fc_attrs*>(node.attrs);
  if (DLHOST_HAS_FIELD(fc, dlhost_fc_attrs, batch_dims) && fc->batch_dims != 1) {
    *what = "attribute fc.batch_dims=" + std::to_string(fc->batch_dims);
    return 1;
  }
  return 0;
}

// " (device cpu0 dispatches avx2)": the ISA the backend's first device dispatches, as a backend's
// modes can depend on it (cpu_onednn offers bf16 only with avx512_core_bf16 or AMX); "" when the
// backend is not queried yet or has no device.
std::string device_isa_text(const LoadedPlugin& backend) {
  if (backend.kind != DLHOST_PLUGIN_BACKEND || !backend.queried || !backend.usable ||
      backend.table == nullptr || backend.table->backend == nullptr)
    return "";
  const dlhost_backend_api* api = backend.table->backend;
  if (api->device_count() <= 0) return "";
  const dlhost_device_info* info = nullptr;
  StatusPtr failed(api->device_info(0, &info));
  if (failed || info == nullptr || info->isa == nullptr || info->isa[0] == '\0') return "";
  return std::string(" (device ") + (info->name != nullptr ? info->name : "0") + " dispatches " +
         info->isa + ")";
}

int32_t precision_value(const std::string& name) {
  const auto& names = precision_names();
  auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? 0 : static_cast<int32_t>(it - names.begin()) + DLHOST_PRECISION_FP32;
}

}  // namespace

std::optional<std::string> abi_gap(const LoadedPlugin& backend, const dlhost_graph& graph) {
  for (int32_t i = 0; i < graph.num_nodes; ++i) {
    const dlhost_node& node = *graph.nodes[i];
    std::string what = "op " + sdk::op_name(node.op);
    uint32_t need = std::max(minor_of_op(node.op), minor_of_attrs(node, &what));
    if (need > backend.speaks_minor)
      return "backend " + backend.name + " implements ABI " + abi_text(backend.speaks_minor) +
             "; " + what + " (node " + (node.name != nullptr ? node.name : "?") + ") needs " +
             abi_text(need);
  }
  return std::nullopt;
}

BackendCaps backend_caps(const LoadedPlugin& backend) {
  BackendCaps caps;
  const dlhost_backend_caps_ext* ext = backend.extensions.caps;
  dlhost_backend_caps c{};
  c.struct_size = DLHOST_BACKEND_CAPS_STRUCT_SIZE;
  if (ext != nullptr) {
    StatusPtr failed(ext->capabilities(&c));
    caps.published = !failed;
  }
  if (!caps.published) {
    caps.precisions = 1u << DLHOST_PRECISION_FP32;
    caps.dtypes = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_I32);
    caps.memory_spaces = 1u << DLHOST_MEMORY_HOST;
    const int32_t last = backend.speaks_minor >= 1 ? DLHOST_OP_GLOBAL_AVG_POOL : DLHOST_OP_MSE_LOSS;
    for (int32_t op = DLHOST_OP_INPUT; op <= last; ++op) caps.ops.push_back(op);
    caps.optimizers = 1u << DLHOST_OPTIMIZER_SGD;
    return caps;
  }
  // A backend older than 1.4 leaves `optimizers` unwritten: SGD alone.
  caps.optimizers = backend.speaks_minor >= kTransformerMinor && c.optimizers != 0
                        ? c.optimizers
                        : 1u << DLHOST_OPTIMIZER_SGD;
  if (c.ops != nullptr) caps.ops.assign(c.ops, c.ops + std::max(c.op_count, 0));
  caps.dtypes = c.dtypes;
  caps.precisions = c.precisions;
  caps.memory_spaces = c.memory_spaces;
  caps.asynchronous = c.asynchronous != 0;
  return caps;
}

const std::vector<std::string>& precision_names() {
  // In dlhost_precision order, from DLHOST_PRECISION_FP32.
  static const std::vector<std::string> names{"fp32", "tf32", "bf16", "fp16"};
  return names;
}

std::string caps_precisions_text(const BackendCaps& caps) {
  std::string out;
  for (const auto& name : precision_names())
    if (caps.precisions & (1u << precision_value(name))) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

std::optional<std::string> precision_gap(const LoadedPlugin& backend,
                                         const std::string& precision) {
  const int32_t mode = precision_value(precision);
  if (mode == 0) return "unknown precision '" + precision + "' (fp32, tf32, bf16 or fp16)";
  BackendCaps caps = backend_caps(backend);
  if (caps.precisions & (1u << mode)) return std::nullopt;
  return "backend " + backend.name + " implements precision " + caps_precisions_text(caps) +
         (caps.published ? "" : " (it publishes no capabilities: fp32 is assumed)") +
         "; the case asks for " + precision + device_isa_text(backend);
}

std::optional<std::string> ops_gap(const LoadedPlugin& backend, const dlhost_graph& graph) {
  BackendCaps caps = backend_caps(backend);
  if (!caps.published) return std::nullopt;
  for (int32_t i = 0; i < graph.num_nodes; ++i) {
    const dlhost_node& node = *graph.nodes[i];
    if (std::find(caps.ops.begin(), caps.ops.end(), node.op) == caps.ops.end())
      return "backend " + backend.name + " does not list op " + sdk::op_name(node.op) + " (node " +
             (node.name != nullptr ? node.name : "?") + ") in its capabilities";
  }
  return std::nullopt;
}

const char* optimizer_name(int32_t kind) {
  switch (kind) {
    case DLHOST_OPTIMIZER_SGD:
      return "sgd";
    case DLHOST_OPTIMIZER_ADAMW:
      return "adamw";
    default:
      return "unknown";
  }
}

std::optional<std::string> optimizer_gap(const LoadedPlugin& backend, int32_t kind) {
  if (kind == DLHOST_OPTIMIZER_SGD) return std::nullopt;
  BackendCaps caps = backend_caps(backend);
  if (kind > 0 && kind < 32 && (caps.optimizers & (1u << kind)) != 0) return std::nullopt;
  std::string has;
  for (int32_t k = DLHOST_OPTIMIZER_SGD; k <= DLHOST_OPTIMIZER_ADAMW; ++k)
    if (caps.optimizers & (1u << k))
      has += (has.empty() ? "" : ", ") + std::string(optimizer_name(k));
  return "backend " + backend.name + " implements optimizer " + (has.empty() ? "none" : has) +
         "; the case asks for " + optimizer_name(kind);
}

void add_precision_options(const nlohmann::ordered_json& params, dlhost_options& options) {
  auto p = params.find("precision");
  const std::string precision =
      p != params.end() && p->is_string() ? p->get<std::string>() : "fp32";
  options.values["precision"] = precision;
  if (precision != "fp16") return;
  auto s = params.find("loss_scale");
  options.values["loss_scale"] = s != params.end() && s->is_number() ? s->dump() : "0";
}

bool is_host_set_option(const std::string& key) {
  return key == "threads" || key == "seed" || key == "precision" || key == "loss_scale" ||
         key == "fused_step" || key == "tool_runtime";
}

bool fused_step_allowed(uint32_t plugin_minor, const std::string& mode, int64_t world_size,
                        const std::string& comm, bool gradient_reader) {
  // A plugin before 1.4 does not know the option (and a schema-declaring one would refuse it);
  // with more than one rank or any comm the host all-reduces the gradients between backward
  // and update, and a gradient reader needs them in their buffers then.
  return plugin_minor >= 4 && mode != "off" && world_size == 1 && comm == "none" &&
         !gradient_reader;
}

bool step_was_fused(uint32_t plugin_minor, bool allowed, const dlhost_model_info& info) {
  if (!allowed) return false;
  if (plugin_minor < 5 || !DLHOST_HAS_FIELD(&info, dlhost_model_info, fused_step)) return true;
  return info.fused_step != 0;
}

std::vector<std::string> departures_of(uint32_t plugin_minor, const dlhost_model_info& info) {
  std::vector<std::string> out;
  if (plugin_minor < 5 || !DLHOST_HAS_FIELD(&info, dlhost_model_info, departures) ||
      info.departures == nullptr)
    return out;
  const std::string all = info.departures;
  size_t start = 0;
  while (start <= all.size()) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    std::string line = all.substr(start, end - start);
    const size_t first = line.find_first_not_of(" \t\r"), last = line.find_last_not_of(" \t\r");
    if (first != std::string::npos) out.push_back(line.substr(first, last - first + 1));
    start = end + 1;
  }
  return out;
}

std::optional<std::string> check_plugin_option(const PluginRegistry& registry,
                                               const std::string& plugin_name,
                                               const std::string& option,
                                               const std::string& value) {
  for (const auto& p : registry.plugins()) {
    if (p.name != plugin_name || p.extensions.option_schema == nullptr) continue;
    if (is_host_set_option(option) && p.kind == DLHOST_PLUGIN_BACKEND)
      return "plugin '" + plugin_name + "': option '" + option +
             "' is set by the host; give the case key '" + option + "' instead";
    if (auto why = check_options(plugin_name, p.options, {{option, value}})) return why;
  }
  return std::nullopt;
}

}  // namespace dlhost
