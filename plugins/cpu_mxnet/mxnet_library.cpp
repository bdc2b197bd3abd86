// mxnet_library.cpp — see mxnet_library.h: loading libmxnet.so with the case's engine settings,
// the C API table, MXNet's errors as sdk::Error, and the handle owners.
#include "mxnet_library.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl_version.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include "dlhost/backend_kit.hpp"

#ifndef DLHOST_MXNET_LIBRARY
#error "DLHOST_MXNET_LIBRARY (the full path of the wheel's libmxnet.so) is set by CMakeLists.txt"
#endif

namespace dlhost::cpu_mxnet {

namespace sdk = dlhost::sdk;

// check() against a table that is not (yet) the loaded one.
void check_with(const Api& api, int rc, const char* call);

namespace {

struct Loaded {
  void* handle = nullptr;
  Api api;
  EngineState state;
};

std::mutex& load_mutex() {
  static std::mutex m;
  return m;
}
// Written once under load_mutex, never unloaded (MXNet's engine threads live with the process).
std::optional<Loaded>& loaded() {
  static std::optional<Loaded> l;
  return l;
}

void* symbol(void* handle, const char* name) {
  void* p = dlsym(handle, name);
  if (p == nullptr)
    sdk::fail(DLHOST_CODE_UNAVAILABLE, std::string("cpu_mxnet: ") + DLHOST_MXNET_LIBRARY +
                                           " has no " + name + " (not MXNet 1.9?)");
  return p;
}

Loaded open_library() {
  Loaded l;
  l.handle = dlopen(DLHOST_MXNET_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (l.handle == nullptr)
    sdk::fail(DLHOST_CODE_UNAVAILABLE,
              std::string("cpu_mxnet: cannot load ") + DLHOST_MXNET_LIBRARY + ": " + dlerror());
#define DLHOST_MXNET_RESOLVE(f) l.api.f = reinterpret_cast<decltype(&::f)>(symbol(l.handle, #f));
  DLHOST_MXNET_FUNCTIONS(DLHOST_MXNET_RESOLVE)
#undef DLHOST_MXNET_RESOLVE
  check_with(l.api, l.api.MXGetVersion(&l.state.version), "MXGetVersion");
  return l;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

std::string describe(const EngineRequest& r) {
  return std::to_string(r.threads) + " thread(s), " + r.engine;
}

}  // namespace

void check_with(const Api& api, int rc, const char* call) {
  if (rc == 0) return;
  std::string what = api.MXGetLastError != nullptr ? api.MXGetLastError() : "unknown error";
  // MXNet appends its C++ stack trace; the first lines say what went wrong.
  const size_t trace = what.find("\nStack trace");
  if (trace != std::string::npos) what.resize(trace);
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
  // MXNet's storage managers say "Failed to allocate CPU Memory" when malloc refuses: the
  // case's size, not a fault of the plugin (the record must say OOM).
  const bool oom = what.find("Failed to allocate") != std::string::npos;
  sdk::fail(oom ? DLHOST_CODE_RESOURCE_EXHAUSTED : DLHOST_CODE_INTERNAL,
            std::string("cpu_mxnet: ") + call + ": " + what);
}

void check(int rc, const char* call) { check_with(mx(), rc, call); }

const EngineState& load_mxnet(const EngineRequest& request) {
  std::lock_guard<std::mutex> lock(load_mutex());
  if (loaded()) {
    const EngineState& s = loaded()->state;
    if (!(s.request == request))
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
                "cpu_mxnet: MXNet was loaded in this process for " + describe(s.request) +
                    "; this context asks for " + describe(request) +
                    " (MXNet fixes its OpenMP threads when it loads; each case of `dlhost run` "
                    "has its own process)");
    return s;
  }
  // MXNet's engine::OpenMP reads its cap in a static initializer when the library loads; the
  // engine reads the rest when it starts, at the first array. With OMP_NUM_THREADS unset, MXNet
  // gives each engine worker min(the cap, libgomp's default) threads: the case's count.
  const int threads = request.threads > 0 ? request.threads : sdk::cpu_info().cores;
  const std::string t = std::to_string(threads);
  if (std::getenv("OMP_NUM_THREADS") != nullptr)  // MXNet would then ignore its cap for oneDNN
    unsetenv("OMP_NUM_THREADS");
  setenv("MXNET_OMP_MAX_THREADS", t.c_str(), 1);
  setenv("MXNET_ENGINE_TYPE", request.engine.c_str(), 1);
  setenv("MXNET_CPU_WORKER_NTHREADS", "1", 0);  // MXNet's default, pinned unless set by the user
  Loaded l = open_library();
  l.state.request = request;
  l.state.cpu_workers = env_int("MXNET_CPU_WORKER_NTHREADS", 1);
  // libgomp's default for a new thread (an engine worker), which MXNet caps at `threads`.
  using MaxThreads = int (*)();
  auto max_threads = reinterpret_cast<MaxThreads>(symbol(l.handle, "omp_get_max_threads"));
  int fresh = 1;
  std::thread([&] { fresh = max_threads(); }).join();
  l.state.omp_threads = std::min(fresh, threads);
  if (l.state.omp_threads != threads)
    sdk::log(DLHOST_LOG_WARN, "cpu_mxnet",
             "OpenMP gives new threads " + std::to_string(fresh) + " threads; the case asked for " +
                 t + ", MXNet uses " + std::to_string(l.state.omp_threads));
  loaded() = std::move(l);
  return loaded()->state;
}

const Api& mx() {
  if (!loaded())
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_mxnet: MXNet is not loaded (no context)");
  return loaded()->api;
}

const Api& load_for_description() {
  std::lock_guard<std::mutex> lock(load_mutex());
  if (!loaded()) loaded() = open_library();
  return loaded()->api;
}

std::string describe_library(const Api& api) {
  int version = 0;
  check_with(api, api.MXGetVersion(&version), "MXGetVersion");
  const LibFeature* features = nullptr;
  size_t count = 0;
  check_with(api, api.MXLibInfoFeatures(&features, &count), "MXLibInfoFeatures");
  std::string blas = "BLAS", kernels = "generic";
  bool onednn = false, openmp = false;
  for (size_t i = 0; i < count; ++i) {
    if (!features[i].enabled) continue;
    const std::string name = features[i].name;
    if (name == "MKLDNN") onednn = true;
    if (name == "OPENMP") openmp = true;
    if (name.rfind("BLAS_", 0) == 0) blas = name.substr(5);
    if (name.rfind("CPU_", 0) == 0) kernels = name.substr(4);  // the list grows SSE .. AVX2
  }
  if (blas == "OPEN") {
    using Config = char* (*)();
    void* handle = dlopen(DLHOST_MXNET_LIBRARY, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    auto config = handle ? reinterpret_cast<Config>(dlsym(handle, "openblas_get_config")) : nullptr;
    const std::string c = config ? config() : "OpenBLAS";  // "OpenBLAS 0.3.20 DYNAMIC_ARCH ..."
    blas = c.substr(0, c.find(' ', c.find(' ') + 1));
    if (handle) dlclose(handle);
  }
  std::string s = "MXNet " + std::to_string(version / 10000) + "." +
                  std::to_string(version / 100 % 100) + "." + std::to_string(version % 100) + " (";
  if (onednn)
    s += "oneDNN " + std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR) +
         "." + std::to_string(DNNL_VERSION_PATCH) + ", ";
  s += blas + (openmp ? ", OpenMP" : "") + "; MXNet's kernels " + kernels + ")";
  return s;
}

NDArray NDArray::zeros(const std::vector<uint32_t>& shape) {
  NDArrayHandle h = nullptr;
  check(mx().MXNDArrayCreateEx(shape.data(), static_cast<uint32_t>(shape.size()), /*cpu=*/1, 0,
                               /*delay_alloc=*/0, /*float32=*/0, &h),
        "MXNDArrayCreateEx");
  NDArray a(h);
  invoke("_zeros", {}, {{"shape", tuple({shape.begin(), shape.end()})}}, {h});
  return a;
}

void NDArray::reset(NDArrayHandle h) {
  if (h_ != nullptr) mx().MXNDArrayFree(h_);  // a failing free has nothing left to say
  h_ = h;
}

NDArray NDArray::view(uint32_t begin, uint32_t end, const std::vector<uint32_t>& shape) const {
  NDArrayHandle slice = nullptr, shaped = nullptr;
  check(mx().MXNDArraySlice(h_, begin, end, &slice), "MXNDArraySlice");
  NDArray s(slice);
  std::vector<int> dims(shape.begin(), shape.end());
  check(mx().MXNDArrayReshape(slice, static_cast<int>(dims.size()), dims.data(), &shaped),
        "MXNDArrayReshape");
  return NDArray(shaped);
}

void NDArray::copy_from(const float* data, size_t count) const {
  check(mx().MXNDArraySyncCopyFromCPU(h_, data, count), "MXNDArraySyncCopyFromCPU");
}
void NDArray::copy_to(float* data, size_t count) const {
  check(mx().MXNDArraySyncCopyToCPU(h_, data, count), "MXNDArraySyncCopyToCPU");
}
void NDArray::wait_to_read() const { check(mx().MXNDArrayWaitToRead(h_), "MXNDArrayWaitToRead"); }
float* NDArray::data() const {
  void* p = nullptr;
  check(mx().MXNDArrayGetData(h_, &p), "MXNDArrayGetData");
  return static_cast<float*>(p);
}

Symbol::~Symbol() {
  if (h_ != nullptr) mx().MXSymbolFree(h_);
}

std::string tuple(const std::vector<int64_t>& values) {
  std::string s = "(";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
  return s + (values.size() == 1 ? ",)" : ")");
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

AtomicSymbolCreator op_handle(const std::string& name) {
  OpHandle op = nullptr;
  if (mx().NNGetOpHandle(name.c_str(), &op) != 0 || op == nullptr)
    sdk::unimplemented("cpu_mxnet: MXNet " + std::to_string(loaded()->state.version) +
                       " has no operator " + name);
  return op;
}

std::vector<NDArray> invoke(const std::string& op, const std::vector<NDArrayHandle>& inputs,
                            const Attrs& attrs, const std::vector<NDArrayHandle>& outputs) {
  AttrArrays a(attrs);
  std::vector<NDArrayHandle> in = inputs, given = outputs;
  int count = static_cast<int>(given.size());
  NDArrayHandle* out = given.empty() ? nullptr : given.data();
  check(mx().MXImperativeInvoke(op_handle(op), static_cast<int>(in.size()), in.data(), &count, &out,
                                static_cast<int>(a.keys.size()), a.keys.data(), a.values.data()),
        op.c_str());
  std::vector<NDArray> made;
  if (given.empty())  // MXNet made the outputs (handles in its thread-local list): ours to free
    for (int i = 0; i < count; ++i) made.emplace_back(out[i]);
  return made;
}

}  // namespace dlhost::cpu_mxnet
