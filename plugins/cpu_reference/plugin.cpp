// plugin.cpp — the ABI face of cpu_reference: the entry symbol, the plugin and backend tables,
// the one CPU device, contexts (the options a case sets) and the thin wrappers that hand every
// model call to Model under sdk::guard, so no exception crosses the C boundary.
//
// The backend is the numerical oracle the fast backends are compared against: clarity first,
// speed last. It ranks below every other backend when the host chooses one for a suite.
#include <cblas.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "dlhost/dlhost.hpp"
#include "model.h"

namespace sdk = dlhost::sdk;

// The opaque handles of the ABI, as this backend defines them.
struct dlhost_context {
  std::optional<int64_t> seed;     // the context's "seed" option, when given
  std::optional<int64_t> threads;  // the context's "threads" option, when given
};
struct dlhost_model {
  explicit dlhost_model(std::unique_ptr<cpu_reference::Model> m) : model(std::move(m)) {}
  std::unique_ptr<cpu_reference::Model> model;
};

namespace {

constexpr const char* kName = "cpu_reference";

// --- the device --------------------------------------------------------------------------------

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown CPU" : line.substr(start);
  }
  return "unknown CPU";
}

// "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." -> "0.3.21": the version is the word after "OpenBLAS".
std::string openblas_version() {
  std::istringstream config(openblas_get_config() != nullptr ? openblas_get_config() : "");
  std::string word, version = "unknown";
  while (config >> word)
    if (word == "OpenBLAS" && config >> version) break;
  return version;
}

const dlhost_device_info& device() {
  // Built once, on first use (thread-safe static initialization), and kept for the library's
  // lifetime as the ABI asks.
  static const std::string model = cpu_model_name();
  static const std::string library = "reference (OpenBLAS " + openblas_version() + ")";
  static const dlhost_device_info info = [] {
    dlhost_device_info d{};
    d.struct_size = DLHOST_DEVICE_INFO_STRUCT_SIZE;
    d.index = 0;
    d.kind = DLHOST_DEVICE_CPU;
    d.name = "cpu0";
    d.model = model.c_str();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    d.cores = cores > 0 ? static_cast<int32_t>(cores)
                        : static_cast<int32_t>(std::thread::hardware_concurrency());
    d.isa = "generic";
    long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
    d.memory_bytes = pages > 0 && page_size > 0
                         ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size)
                         : 0;
    d.library = library.c_str();
    return d;
  }();
  return info;
}

int32_t device_count() { return 1; }

dlhost_status* device_info(int32_t index, const dlhost_device_info** out) {
  return sdk::guard([&] {
    if (out == nullptr) sdk::invalid("cpu_reference: device_info into NULL");
    if (index != 0)
      sdk::fail(DLHOST_CODE_OUT_OF_RANGE,
                "cpu_reference has one device (0), asked for " + std::to_string(index));
    *out = &device();
  });
}

// --- contexts ----------------------------------------------------------------------------------

std::optional<int64_t> int_option(const dlhost_options* options, const char* key) {
  if (options == nullptr || !sdk::option(options, key)) return std::nullopt;
  return sdk::option_int(options, key, 0);
}

dlhost_status* context_create(int32_t index, const dlhost_options* options, dlhost_context** out) {
  return sdk::guard([&] {
    if (out == nullptr) sdk::invalid("cpu_reference: context_create into NULL");
    if (index != 0)
      sdk::fail(DLHOST_CODE_OUT_OF_RANGE,
                "cpu_reference has one device (0), asked for " + std::to_string(index));
    auto context = std::make_unique<dlhost_context>();
    context->seed = int_option(options, "seed");
    context->threads = int_option(options, "threads");
    *out = context.release();
  });
}

void context_destroy(dlhost_context* context) { delete context; }

// --- models ------------------------------------------------------------------------------------

dlhost_status* compile(dlhost_context* context, const dlhost_graph* graph,
                       const dlhost_optimizer_desc* optimizer, const dlhost_options* options,
                       dlhost_model** out) {
  return sdk::guard([&] {
    if (context == nullptr || graph == nullptr || optimizer == nullptr || out == nullptr)
      sdk::invalid("cpu_reference: compile needs a context, a graph, an optimizer and an out");
    // The compile call's options win over the context's; "seed" defaults to 42.
    auto seed = int_option(options, "seed");
    if (!seed) seed = context->seed;
    auto threads = int_option(options, "threads");
    if (!threads) threads = context->threads;
    // Only matrix products are threaded (OpenBLAS); the loops around them are single-threaded.
    if (threads && *threads > 0) openblas_set_num_threads(static_cast<int>(*threads));
    cpu_reference::Settings settings;
    settings.seed = static_cast<uint64_t>(seed.value_or(42));
    settings.threads = openblas_get_num_threads();
    auto model = std::make_unique<cpu_reference::Model>(*graph, *optimizer, settings);
    *out = new dlhost_model(std::move(model));
  });
}

void model_destroy(dlhost_model* model) { delete model; }

cpu_reference::Model& unwrap(dlhost_model* model) {
  if (model == nullptr || !model->model) sdk::invalid("cpu_reference: NULL model");
  return *model->model;
}

dlhost_status* model_info(dlhost_model* model, dlhost_model_info* out) {
  return sdk::guard([&] { unwrap(model).info(out); });
}

dlhost_status* set_input(dlhost_model* model, int32_t tensor, const void* data, size_t bytes) {
  return sdk::guard([&] { unwrap(model).set_input(tensor, data, bytes); });
}

dlhost_status* forward(dlhost_model* model) {
  return sdk::guard([&] { unwrap(model).forward(); });
}

dlhost_status* backward(dlhost_model* model, const dlhost_grad_ready* ready) {
  return sdk::guard([&] { unwrap(model).backward(ready); });
}

dlhost_status* update(dlhost_model* model) {
  return sdk::guard([&] { unwrap(model).update(); });
}

// Everything runs synchronously on the calling thread: there is nothing to wait for.
dlhost_status* synchronize(dlhost_model* model) {
  return sdk::guard([&] { unwrap(model); });
}

dlhost_status* read_loss(dlhost_model* model, float* loss) {
  return sdk::guard([&] {
    if (loss == nullptr) sdk::invalid("cpu_reference: read_loss into NULL");
    *loss = unwrap(model).loss();
  });
}

dlhost_status* param_buffers(dlhost_model* model, int32_t param, dlhost_buffer* value,
                             dlhost_buffer* grad) {
  return sdk::guard([&] { unwrap(model).param_buffers(param, value, grad); });
}

dlhost_status* read_param(dlhost_model* model, int32_t param, int32_t part, void* data,
                          size_t bytes) {
  return sdk::guard([&] { unwrap(model).read_param(param, part, data, bytes); });
}

dlhost_status* write_param(dlhost_model* model, int32_t param, int32_t part, const void* data,
                           size_t bytes) {
  return sdk::guard([&] { unwrap(model).write_param(param, part, data, bytes); });
}

dlhost_status* memory_in_use(dlhost_model* model, uint64_t* bytes) {
  return sdk::guard([&] {
    if (bytes == nullptr) sdk::invalid("cpu_reference: memory_in_use into NULL");
    *bytes = unwrap(model).memory_bytes();
  });
}

// Usable everywhere; ranked low so the host picks a fast backend first when one is free to
// choose.
dlhost_status* query(int32_t* priority) {
  return sdk::guard([&] {
    if (priority != nullptr) *priority = -100;
  });
}

const dlhost_backend_api kBackend = [] {
  dlhost_backend_api t{};
  t.struct_size = DLHOST_BACKEND_API_STRUCT_SIZE;
  t.device_count = device_count;
  t.device_info = device_info;
  t.context_create = context_create;
  t.context_destroy = context_destroy;
  t.compile = compile;
  t.model_destroy = model_destroy;
  t.model_info = model_info;
  t.set_input = set_input;
  t.forward = forward;
  t.backward = backward;
  t.update = update;
  t.synchronize = synchronize;
  t.read_loss = read_loss;
  t.param_buffers = param_buffers;
  t.read_param = read_param;
  t.write_param = write_param;
  t.memory_in_use = memory_in_use;
  return t;
}();

const dlhost_plugin kPlugin = [] {
  dlhost_plugin p{};
  p.struct_size = DLHOST_PLUGIN_STRUCT_SIZE;
  p.abi_major = DLHOST_ABI_MAJOR;
  p.abi_minor = DLHOST_ABI_MINOR;
  p.kind = DLHOST_PLUGIN_BACKEND;
  p.name = kName;
  p.version = "1.0.0";
  p.description =
      "numerical reference: textbook loops in float32 with double sums, im2col + OpenBLAS sgemm";
  p.query = query;
  p.backend = &kBackend;
  return p;
}();

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!sdk::attach_host(host, kName)) return nullptr;
  return &kPlugin;
}
