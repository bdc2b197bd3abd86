// faulty_backend.cpp — a test fixture: a backend that misbehaves on demand, to check that one
// case's fault never loses the others' results. Option "fault_rank" limits the fault to one
// rank of a multi-rank case (read from Open MPI's environment, or from DLHOST_RANK under
// `launcher: local`). Option "fault" picks what
// forward does:
// none, error (returns INTERNAL), throw (lets a C++ exception escape through the C ABI), segv,
// abort, exit (calls exit(3)), exit0 (calls exit(0)), hang (sleeps forever), oom (allocates until
// refused; run it under memory_limit_mb). One fault is in compile instead: hang_compile (sleeps
// forever there, so the other ranks wait for this one in the comm's init); one at the process's
// exit: hang_at_exit (trains normally, then hangs in an exit handler, after its record is out). Its
// "training" only makes a loss that falls (1 / step), which is all the host needs to time it.
#include <dlhost/dlhost.hpp>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace sdk = dlhost::sdk;

struct Model {
  std::string fault;
  int64_t steps = 0;
  std::vector<std::vector<float>> params, grads;
};

const dlhost_device_info* device() {
  static dlhost_device_info info = [] {
    auto d = sdk::make_struct<dlhost_device_info>(DLHOST_DEVICE_INFO_STRUCT_SIZE);
    d.kind = DLHOST_DEVICE_CPU;
    d.name = "cpu0";
    d.model = "fixture";
    d.cores = 1;
    d.isa = "none";
    d.library = "faulty fixture";
    return d;
  }();
  return &info;
}

dlhost_status* forward(dlhost_model* m) {
  auto* model = reinterpret_cast<Model*>(m);
  const std::string& f = model->fault;
  if (f == "throw") throw std::runtime_error("fixture exception escaping the C ABI");
  return sdk::guard([&] {
    if (f == "error") sdk::fail(DLHOST_CODE_INTERNAL, "fixture error from forward");
    if (f == "segv") std::raise(SIGSEGV);
    if (f == "abort") std::abort();
    if (f == "exit") std::exit(3);
    if (f == "exit0") std::exit(0);
    if (f == "hang")
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    if (f == "oom") {
      std::vector<std::vector<char>> hog;
      for (;;) hog.emplace_back(64 << 20, 1);
    }
    ++model->steps;
  });
}

dlhost_status* noop(dlhost_model*) { return nullptr; }

const dlhost_backend_api kApi = [] {
  auto t = sdk::make_struct<dlhost_backend_api>(DLHOST_BACKEND_API_STRUCT_SIZE);
  t.device_count = [] { return 1; };
  t.device_info = [](int32_t, const dlhost_device_info** out) {
    return sdk::guard([&] { *out = device(); });
  };
  t.context_create = [](int32_t, const dlhost_options*, dlhost_context** out) {
    return sdk::guard([&] { *out = reinterpret_cast<dlhost_context*>(new int(0)); });
  };
  t.context_destroy = [](dlhost_context* c) { delete reinterpret_cast<int*>(c); };
  t.compile = [](dlhost_context*, const dlhost_graph* g, const dlhost_optimizer_desc*,
                 const dlhost_options* options, dlhost_model** out) {
    return sdk::guard([&] {
      auto* m = new Model;
      m->fault = sdk::option(options, "fault").value_or("none");
      const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
      if (rank == nullptr) rank = std::getenv("DLHOST_RANK");
      auto only = sdk::option(options, "fault_rank");
      if (only && *only != (rank != nullptr ? rank : "0")) m->fault = "none";
      if (m->fault == "hang_compile")
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (m->fault == "hang_at_exit")
        std::atexit([] {
          for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        });
      for (int32_t i = 0; i < g->num_params; ++i) {
        m->params.emplace_back(static_cast<size_t>(g->params[i]->count));
        m->grads.emplace_back(static_cast<size_t>(g->params[i]->count));
      }
      *out = reinterpret_cast<dlhost_model*>(m);
    });
  };
  t.model_destroy = [](dlhost_model* m) { delete reinterpret_cast<Model*>(m); };
  t.model_info = [](dlhost_model*, dlhost_model_info* out) {
    return sdk::guard([&] {
      out->threads = 1;
      out->implementation = "fixture";
    });
  };
  t.set_input = [](dlhost_model*, int32_t, const void*, size_t) -> dlhost_status* {
    return nullptr;
  };
  t.forward = forward;
  t.backward = [](dlhost_model*, const dlhost_grad_ready*) -> dlhost_status* { return nullptr; };
  t.update = noop;
  t.synchronize = noop;
  t.read_loss = [](dlhost_model* m, float* loss) {
    return sdk::guard(
        [&] { *loss = 1.0f / static_cast<float>(reinterpret_cast<Model*>(m)->steps); });
  };
  t.param_buffers = [](dlhost_model* m, int32_t p, dlhost_buffer* value, dlhost_buffer* grad) {
    return sdk::guard([&] {
      auto* model = reinterpret_cast<Model*>(m);
      auto fill = [](dlhost_buffer* b, std::vector<float>& v) {
        b->data = v.data();
        b->bytes = v.size() * 4;
        b->dtype = DLHOST_DTYPE_F32;
        b->memory_space = DLHOST_MEMORY_HOST;
        b->device = -1;
      };
      fill(value, model->params.at(static_cast<size_t>(p)));
      fill(grad, model->grads.at(static_cast<size_t>(p)));
    });
  };
  t.read_param = [](dlhost_model* m, int32_t p, int32_t, void* data, size_t bytes) {
    return sdk::guard([&] {
      std::memcpy(data, reinterpret_cast<Model*>(m)->params.at(static_cast<size_t>(p)).data(),
                  bytes);
    });
  };
  t.write_param = [](dlhost_model* m, int32_t p, int32_t, const void* data, size_t bytes) {
    return sdk::guard([&] {
      std::memcpy(reinterpret_cast<Model*>(m)->params.at(static_cast<size_t>(p)).data(), data,
                  bytes);
    });
  };
  t.memory_in_use = [](dlhost_model*, uint64_t* bytes) { return sdk::guard([&] { *bytes = 0; }); };
  return t;
}();

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!sdk::attach_host(host, "faulty")) return nullptr;
  static const dlhost_plugin plugin = [] {
    auto p = sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
    p.abi_major = DLHOST_ABI_MAJOR;
    p.abi_minor = DLHOST_ABI_MINOR;
    p.kind = DLHOST_PLUGIN_BACKEND;
    p.name = "faulty";
    p.version = "0";
    p.description = "test fixture: misbehaves on demand";
    p.backend = &kApi;
    return p;
  }();
  return &plugin;
}
