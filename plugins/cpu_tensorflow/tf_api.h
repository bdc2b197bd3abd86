// tf_api.h — the few pieces of glue cpu_tensorflow puts over TensorFlow's C API (c_api.h):
// owning handles for its objects, one check that turns a TF_Status into the host's error naming
// the call, a builder that adds one graph operation in one expression, host tensors whose memory
// TensorFlow borrows (fed without a copy), and the serialized ConfigProto a session is opened with.
// Thread-safety: none of its own; a graph is built from one thread, as the C API asks.
#ifndef DLHOST_CPU_TENSORFLOW_TF_API_H
#define DLHOST_CPU_TENSORFLOW_TF_API_H

#include <tensorflow/c/c_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dlhost::cpu_tensorflow::tf {

struct StatusDeleter {
  void operator()(TF_Status* s) const { TF_DeleteStatus(s); }
};
struct GraphDeleter {
  void operator()(TF_Graph* g) const { TF_DeleteGraph(g); }
};
struct TensorDeleter {
  void operator()(TF_Tensor* t) const { TF_DeleteTensor(t); }
};
using StatusPtr = std::unique_ptr<TF_Status, StatusDeleter>;
using GraphPtr = std::unique_ptr<TF_Graph, GraphDeleter>;
using TensorPtr = std::unique_ptr<TF_Tensor, TensorDeleter>;

// Throws the host's INTERNAL error "cpu_tensorflow: <what>: <TensorFlow's message>" unless OK.
void check(TF_Status* status, const std::string& what);

// A session over a graph, closed and deleted together; `target` empty: in-process (a
// DirectSession), else a server's (TF_ServerTarget: "grpc://host:port").
class Session {
 public:
  Session(TF_Graph* graph, const std::string& config, const std::string& target = "");
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // One TF_SessionRun; `outputs` receives owned tensors. `what` names the call in errors.
  void run(const std::vector<TF_Output>& feeds, const std::vector<TF_Tensor*>& values,
           const std::vector<TF_Output>& fetches, std::vector<TensorPtr>& outputs,
           const std::vector<TF_Operation*>& targets, const std::string& what,
           const std::string& run_options = "");

 private:
  TF_Session* session_ = nullptr;
};

// A float tensor TensorFlow allocates (64-byte aligned, its own allocator).
TensorPtr float_tensor(const std::vector<int64_t>& dims);
TensorPtr int_tensor(const std::vector<int64_t>& dims);
TensorPtr int64_scalar(int64_t value);
// A tensor over `data` (which must outlive every use and be 64-byte aligned, so TensorFlow takes
// it without copying): feeds the plugin's own buffers as they are.
TensorPtr borrowed_tensor(float* data, const std::vector<int64_t>& dims);
int64_t elements(const std::vector<int64_t>& dims);

// While one is alive on this thread, every Op added whose name `device_for` maps to a device
// ("" none) is placed there (TF_SetDevice): how a runtime puts variables and the ops named after
// them on another task (tf_ps: /job:ps/...). Scopes do not nest.
class DeviceScope {
 public:
  explicit DeviceScope(std::function<std::string(const std::string& op)> device_for);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
};

// Adds one operation: Op(graph, "Conv2D", "conv1").in(x).in(w).attr_ints(...).out().
class Op {
 public:
  Op(TF_Graph* graph, const char* type, const std::string& name);
  Op& in(TF_Output x);
  Op& ins(const std::vector<TF_Output>& xs);  // a list input (AddN, Pack)
  Op& after(TF_Operation* op);                // a control dependency
  Op& attr(const char* name, int64_t v);
  Op& attr(const char* name, float v);
  Op& attr(const char* name, bool v);
  Op& attr(const char* name, const char* v);
  Op& attr(const char* name, TF_DataType v);
  Op& attr_ints(const char* name, const std::vector<int64_t>& v);
  Op& attr_types(const char* name, const std::vector<TF_DataType>& v);  // a list(type)
  Op& shape(const char* name, const std::vector<int64_t>& dims);
  Op& tensor(const char* name, TF_Tensor* value);  // copied into the graph
  TF_Operation* finish();
  TF_Output out(int index = 0) { return {finish(), index}; }

 private:
  TF_OperationDescription* desc_;
  std::string name_;
  TF_Operation* done_ = nullptr;
};

// Protocol buffer wire format, for the few messages the C API takes serialized (ConfigProto,
// ServerDef, RunOptions): a varint field, a length-delimited one (a string or a message).
namespace pb {
void int_field(std::string& out, int field, uint64_t v);
void bytes_field(std::string& out, int field, const std::string& body);
}  // namespace pb

// serialized tensorflow.ConfigProto: the thread pools and, for XLA, the global JIT level with
// cpu_global_jit. Field numbers from tensorflow/core/protobuf/config.proto.
std::string config_proto(int32_t intra_op_threads, int32_t inter_op_threads, bool xla_jit);

}  // namespace dlhost::cpu_tensorflow::tf

#endif  // DLHOST_CPU_TENSORFLOW_TF_API_H
