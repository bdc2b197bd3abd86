// mxnet_library.h — libmxnet.so (the PyPI wheel mxnet 1.9.1) as cpu_mxnet reaches it: loaded
// with dlopen at the first context, after the case's thread count and engine are put into the
// environment MXNet reads, because MXNet fixes its OpenMP thread cap in a static initializer
// (engine::OpenMP, MXNET_OMP_MAX_THREADS / OMP_NUM_THREADS) the moment the library loads, and a
// plugin linked against it would load it before any case option is known. The C API is called
// through a table of pointers typed by the wheel's own headers (c_api.h, nnvm/c_api.h); every
// failing call becomes an sdk::Error carrying MXGetLastError()'s text.
// Also: RAII owners of MXNet's handles (NDArray, Symbol) and the strings its operators take.
// Thread-safety: load() may be called from any thread (once-guarded); the rest follows MXNet's C
// API, which a context and its models use from one host thread at a time.
#ifndef DLHOST_CPU_MXNET_MXNET_LIBRARY_H
#define DLHOST_CPU_MXNET_MXNET_LIBRARY_H

#include <mxnet/c_api.h>
#include <nnvm/c_api.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dlhost::cpu_mxnet {

// Every MXNet C function cpu_mxnet calls.
#define DLHOST_MXNET_FUNCTIONS(X)                                                                 \
  X(MXGetLastError)                                                                               \
  X(MXGetVersion)                                                                                 \
  X(MXLibInfoFeatures)                                                                            \
  X(MXSetNumOMPThreads)                                                                           \
  X(MXNDArrayCreateEx)                                                                            \
  X(MXNDArrayFree)                                                                                \
  X(MXNDArraySlice) X(MXNDArrayReshape) X(MXNDArrayGetData) X(MXNDArraySyncCopyFromCPU)           \
      X(MXNDArraySyncCopyToCPU) X(MXNDArrayWaitToRead) X(MXNDArrayWaitAll) X(MXImperativeInvoke)  \
          X(MXAutogradSetIsRecording) X(MXAutogradSetIsTraining) X(MXAutogradMarkVariables)       \
              X(MXAutogradBackwardEx) X(MXCreateCachedOpEx) X(MXFreeCachedOp) X(MXInvokeCachedOp) \
                  X(MXSymbolCreateAtomicSymbol) X(MXSymbolCreateVariable) X(MXSymbolCompose)      \
                      X(MXSymbolFree) X(MXSymbolGetInternals) X(MXSymbolListOutputs)              \
                          X(MXSymbolInferShape) X(NNGetOpHandle) X(NNSymbolListInputNames)        \
                              X(MXInitPSEnv) X(MXKVStoreCreate) X(MXKVStoreFree) X(MXKVStoreInit) \
                                  X(MXKVStorePush) X(MXKVStorePull) X(MXKVStoreRunServer)         \
                                      X(MXKVStoreSetUpdater) X(MXKVStoreSendCommmandToServers)

struct Api {
#define DLHOST_MXNET_POINTER(f) decltype(&::f) f = nullptr;
  DLHOST_MXNET_FUNCTIONS(DLHOST_MXNET_POINTER)
#undef DLHOST_MXNET_POINTER
};

// What a context asks of MXNet's engine; fixed for the process once the library is loaded.
struct EngineRequest {
  int threads = 0;                                 // OpenMP threads per operator; 0: one per core
  std::string engine = "ThreadedEnginePerDevice";  // MXNET_ENGINE_TYPE
  bool operator==(const EngineRequest& o) const {
    return threads == o.threads && engine == o.engine;
  }
};

// What MXNet runs with, as loaded.
struct EngineState {
  EngineRequest request;
  int omp_threads = 1;  // OpenMP threads a new engine worker gets (what oneDNN and MXNet's
                        // kernels use per operator)
  int cpu_workers = 1;  // MXNET_CPU_WORKER_NTHREADS: engine threads running CPU operators
  int version = 0;      // MXGetVersion: 10901
};

// Loads libmxnet.so (once per process) with `request`'s environment; FAILED_PRECONDITION when it
// was loaded already for another request (MXNet cannot change its thread cap afterwards).
const EngineState& load_mxnet(const EngineRequest& request);
// The loaded library's C API; FAILED_PRECONDITION before load_mxnet.
const Api& mx();

// Throws INTERNAL "cpu_mxnet: <call>: <MXGetLastError, without the stack trace>" when rc != 0.
void check(int rc, const char* call);

// "MXNet 1.9.1 (oneDNN 2.4.4 on, OpenBLAS 0.3.x, OpenMP; MXNet's kernels SSE3)": what the
// library says of itself, asked by describe.cpp when the plugin is built (see CMakeLists.txt).
std::string describe_library(const Api& api);
// Loads libmxnet.so for describe.cpp alone, with MXNet's own defaults.
const Api& load_for_description();

// An owned NDArrayHandle (MXNDArrayFree on destruction).
class NDArray {
 public:
  NDArray() = default;
  explicit NDArray(NDArrayHandle h) : h_(h) {}
  NDArray(NDArray&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  NDArray& operator=(NDArray&& o) noexcept {
    reset(std::exchange(o.h_, nullptr));
    return *this;
  }
  ~NDArray() { reset(); }
  NDArray(const NDArray&) = delete;
  NDArray& operator=(const NDArray&) = delete;

  // A zero-filled F32 array on the CPU, allocated now.
  static NDArray zeros(const std::vector<uint32_t>& shape);
  NDArrayHandle get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  void reset(NDArrayHandle h = nullptr);
  // A view of elements [begin, end) of a 1-D array, reshaped to `shape` (shares the memory).
  NDArray view(uint32_t begin, uint32_t end, const std::vector<uint32_t>& shape) const;
  // Waits for pending writes, then copies (MXNet's SyncCopy*, which wait as they must).
  void copy_from(const float* data, size_t count) const;
  void copy_to(float* data, size_t count) const;
  void wait_to_read() const;
  float* data() const;  // the CPU memory (default layout); stays put for the array's life

 private:
  NDArrayHandle h_ = nullptr;
};

// An owned SymbolHandle.
class Symbol {
 public:
  Symbol() = default;
  explicit Symbol(SymbolHandle h) : h_(h) {}
  Symbol(Symbol&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Symbol& operator=(Symbol&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Symbol();
  Symbol(const Symbol&) = delete;
  Symbol& operator=(const Symbol&) = delete;
  SymbolHandle get() const { return h_; }

 private:
  SymbolHandle h_ = nullptr;
};

// Operator attributes as MXNet parses them: "(3,3)", "True", "0.100000001".
using Attrs = std::vector<std::pair<std::string, std::string>>;
std::string tuple(const std::vector<int64_t>& values);
std::string number(double value);  // shortest text that round-trips a float
inline const char* flag(bool value) { return value ? "True" : "False"; }

// Keys and values of `attrs` as the C API's parallel arrays (pointers into `attrs`).
struct AttrArrays {
  std::vector<const char*> keys, values;
  explicit AttrArrays(const Attrs& attrs) {
    for (const auto& [k, v] : attrs) {
      keys.push_back(k.c_str());
      values.push_back(v.c_str());
    }
  }
};

// The registered operator `name` (NNGetOpHandle); UNIMPLEMENTED naming it when absent.
AtomicSymbolCreator op_handle(const std::string& name);

// Runs `op` on `inputs` (MXImperativeInvoke): into `outputs` when given (in place), else into
// new arrays returned.
std::vector<NDArray> invoke(const std::string& op, const std::vector<NDArrayHandle>& inputs,
                            const Attrs& attrs, const std::vector<NDArrayHandle>& outputs = {});

}  // namespace dlhost::cpu_mxnet

#endif  // DLHOST_CPU_MXNET_MXNET_LIBRARY_H
