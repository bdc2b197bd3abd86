// plugin.cpp — the cpu_onednn backend's face to the host: the entry symbol, the plugin and
// backend tables, the device description and contexts. Each table function only checks its
// handles and forwards to Model, inside sdk::guard so that no exception crosses the C ABI.
// Thread-safety: device_count/device_info are thread-safe (the description is built once);
// everything else follows the model's rule, one caller at a time.
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "dlhost/dlhost.hpp"
#include "model.h"

namespace dlhost::cpu_onednn {
namespace {

namespace sdk = dlhost::sdk;

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return "unknown CPU";
}

// The cores this process may run on (a container or taskset may give fewer than the machine).
int cpu_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "any";
  }
}

std::string library_name() {
  const dnnl_version_t* v = dnnl_version();
  const char* runtime = "unknown";
  switch (v->cpu_runtime) {
    case DNNL_RUNTIME_OMP:
      runtime = "OMP";
      break;
    case DNNL_RUNTIME_TBB:
      runtime = "TBB";
      break;
    case DNNL_RUNTIME_SEQ:
      runtime = "SEQ";
      break;
    case DNNL_RUNTIME_THREADPOOL:
      runtime = "THREADPOOL";
      break;
    default:
      break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (cpu_runtime=" + runtime + ")";
}

struct Device {
  std::string model, isa, library;
  dlhost_device_info info{};
};

const Device& device() {
  static const Device* d = [] {
    auto* dev = new Device();  // lives as long as the library, as the ABI asks
    dev->model = cpu_model_name();
    dev->isa = isa_name(dnnl::get_effective_cpu_isa());
    dev->library = library_name();
    dev->info.struct_size = DLHOST_DEVICE_INFO_STRUCT_SIZE;
    dev->info.index = 0;
    dev->info.kind = DLHOST_DEVICE_CPU;
    dev->info.name = "cpu0";
    dev->info.model = dev->model.c_str();
    dev->info.cores = cpu_cores();
    dev->info.isa = dev->isa.c_str();
    dev->info.memory_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                             static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    dev->info.library = dev->library.c_str();
    return dev;
  }();
  return *d;
}

void check_device(int32_t index) {
  if (index != 0) sdk::invalid("cpu_onednn: device " + std::to_string(index) + " does not exist");
}

Context& context_of(dlhost_context* c) {
  if (c == nullptr) sdk::invalid("cpu_onednn: null context");
  return *reinterpret_cast<Context*>(c);
}

Model& model_of(dlhost_model* m) {
  if (m == nullptr) sdk::invalid("cpu_onednn: null model");
  return *reinterpret_cast<Model*>(m);
}

int32_t device_count() { return 1; }

dlhost_status* device_info(int32_t index, const dlhost_device_info** out) {
  return sdk::guard([&] {
    check_device(index);
    if (out == nullptr) sdk::invalid("cpu_onednn: device_info: null output");
    *out = &device().info;
  });
}

dlhost_status* context_create(int32_t index, const dlhost_options* options, dlhost_context** out) {
  return sdk::guard([&] {
    check_device(index);
    if (out == nullptr) sdk::invalid("cpu_onednn: context_create: null output");
    const int64_t threads = sdk::option_int(options, "threads", 0);
    if (threads < 0 || threads > 4096)
      sdk::invalid("cpu_onednn: option threads=" + std::to_string(threads) + " out of range");
    auto context = std::make_unique<Context>();
    context->threads_requested = static_cast<int>(threads);
    context->seed = sdk::option_int(options, "seed", context->seed);
    context->apply_threads();
    context->threads = omp_get_max_threads();
    with_dnnl("engine", [&] {
      context->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
      context->stream = dnnl::stream(context->engine);
    });
    *out = reinterpret_cast<dlhost_context*>(context.release());
  });
}

void context_destroy(dlhost_context* context) { delete reinterpret_cast<Context*>(context); }

dlhost_status* compile(dlhost_context* context, const dlhost_graph* graph,
                       const dlhost_optimizer_desc* optimizer, const dlhost_options* options,
                       dlhost_model** out) {
  return sdk::guard([&] {
    Context& ctx = context_of(context);
    if (graph == nullptr || graph->struct_size < DLHOST_GRAPH_STRUCT_SIZE)
      sdk::invalid("cpu_onednn: compile: missing or too old graph");
    if (optimizer == nullptr || optimizer->struct_size < DLHOST_OPTIMIZER_DESC_STRUCT_SIZE)
      sdk::invalid("cpu_onednn: compile: missing or too old optimizer");
    if (out == nullptr) sdk::invalid("cpu_onednn: compile: null output");
    // The compile options are the case's; the context's are the fallback for a host that
    // passes the seed only there.
    const int64_t seed = sdk::option_int(options, "seed", ctx.seed);
    auto model = std::make_unique<Model>(ctx, graph, *optimizer, static_cast<uint64_t>(seed));
    *out = reinterpret_cast<dlhost_model*>(model.release());
  });
}

void model_destroy(dlhost_model* model) { delete reinterpret_cast<Model*>(model); }

dlhost_status* model_info(dlhost_model* model, dlhost_model_info* out) {
  return sdk::guard([&] { model_of(model).info(out); });
}

dlhost_status* set_input(dlhost_model* model, int32_t tensor, const void* data, size_t bytes) {
  return sdk::guard([&] { model_of(model).set_input(tensor, data, bytes); });
}

dlhost_status* forward(dlhost_model* model) {
  return sdk::guard([&] { model_of(model).forward(); });
}

dlhost_status* backward(dlhost_model* model, const dlhost_grad_ready* ready) {
  return sdk::guard([&] { model_of(model).backward(ready); });
}

dlhost_status* update(dlhost_model* model) {
  return sdk::guard([&] { model_of(model).update(); });
}

dlhost_status* synchronize(dlhost_model* model) {
  return sdk::guard([&] { model_of(model).synchronize(); });
}

dlhost_status* read_loss(dlhost_model* model, float* loss) {
  return sdk::guard([&] {
    Model& m = model_of(model);
    if (loss == nullptr) sdk::invalid("cpu_onednn: read_loss: null output");
    m.synchronize();
    *loss = m.loss();
  });
}

dlhost_status* param_buffers(dlhost_model* model, int32_t param, dlhost_buffer* value,
                             dlhost_buffer* grad) {
  return sdk::guard([&] { model_of(model).param_buffers(param, value, grad); });
}

dlhost_status* read_param(dlhost_model* model, int32_t param, int32_t part, void* data,
                          size_t bytes) {
  return sdk::guard([&] { model_of(model).read_param(param, part, data, bytes); });
}

dlhost_status* write_param(dlhost_model* model, int32_t param, int32_t part, const void* data,
                           size_t bytes) {
  return sdk::guard([&] { model_of(model).write_param(param, part, data, bytes); });
}

dlhost_status* memory_in_use(dlhost_model* model, uint64_t* bytes) {
  return sdk::guard([&] {
    Model& m = model_of(model);
    if (bytes == nullptr) sdk::invalid("cpu_onednn: memory_in_use: null output");
    *bytes = m.memory_in_use();
  });
}

const dlhost_backend_api kBackend = {
    DLHOST_BACKEND_API_STRUCT_SIZE,
    &device_count,
    &device_info,
    &context_create,
    &context_destroy,
    &compile,
    &model_destroy,
    &model_info,
    &set_input,
    &forward,
    &backward,
    &update,
    &synchronize,
    &read_loss,
    &param_buffers,
    &read_param,
    &write_param,
    &memory_in_use,
};

const dlhost_plugin kPlugin = {
    DLHOST_PLUGIN_STRUCT_SIZE,
    DLHOST_ABI_MAJOR,
    DLHOST_ABI_MINOR,
    DLHOST_PLUGIN_BACKEND,
    "cpu_onednn",
    "0.1.0",
    "CPU training backend on oneDNN primitives (blocked layouts, OpenMP threads)",
    nullptr,  // query: usable wherever the library loads
    &kBackend,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace
}  // namespace dlhost::cpu_onednn

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!dlhost::sdk::attach_host(host, "cpu_onednn")) return nullptr;
  return &dlhost::cpu_onednn::kPlugin;
}
