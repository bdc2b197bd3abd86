// tf_api.cpp — see tf_api.h.
#include "tf_api.h"

#include <cstring>

#include "dlhost/common.hpp"

namespace dlhost::cpu_tensorflow::tf {

void check(TF_Status* status, const std::string& what) {
  if (TF_GetCode(status) == TF_OK) return;
  // "OOM when allocating tensor with shape[...]": the case's size, not a fault of the plugin.
  sdk::fail(TF_GetCode(status) == TF_RESOURCE_EXHAUSTED ? DLHOST_CODE_RESOURCE_EXHAUSTED
                                                        : DLHOST_CODE_INTERNAL,
            "cpu_tensorflow: " + what + ": " + TF_Message(status));
}

Session::Session(TF_Graph* graph, const std::string& config, const std::string& target) {
  StatusPtr status(TF_NewStatus());
  TF_SessionOptions* options = TF_NewSessionOptions();
  if (!target.empty()) TF_SetTarget(options, target.c_str());
  TF_SetConfig(options, config.data(), config.size(), status.get());
  if (TF_GetCode(status.get()) == TF_OK) session_ = TF_NewSession(graph, options, status.get());
  TF_DeleteSessionOptions(options);
  check(status.get(), "opening a session");
}

Session::~Session() {
  StatusPtr status(TF_NewStatus());
  TF_CloseSession(session_, status.get());
  TF_DeleteSession(session_, status.get());
}

void Session::run(const std::vector<TF_Output>& feeds, const std::vector<TF_Tensor*>& values,
                  const std::vector<TF_Output>& fetches, std::vector<TensorPtr>& outputs,
                  const std::vector<TF_Operation*>& targets, const std::string& what,
                  const std::string& run_options) {
  StatusPtr status(TF_NewStatus());
  std::vector<TF_Tensor*> got(fetches.size(), nullptr);
  TF_Buffer options{run_options.data(), run_options.size(), nullptr};
  TF_SessionRun(session_, run_options.empty() ? nullptr : &options, feeds.data(), values.data(),
                static_cast<int>(feeds.size()), fetches.data(), got.data(),
                static_cast<int>(fetches.size()), targets.data(), static_cast<int>(targets.size()),
                nullptr, status.get());
  outputs.resize(got.size());
  for (size_t k = 0; k < got.size(); ++k) outputs[k].reset(got[k]);
  check(status.get(), what);
}

int64_t elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

TensorPtr float_tensor(const std::vector<int64_t>& dims) {
  return TensorPtr(TF_AllocateTensor(TF_FLOAT, dims.data(), static_cast<int>(dims.size()),
                                     static_cast<size_t>(elements(dims)) * sizeof(float)));
}

TensorPtr int_tensor(const std::vector<int64_t>& dims) {
  return TensorPtr(TF_AllocateTensor(TF_INT32, dims.data(), static_cast<int>(dims.size()),
                                     static_cast<size_t>(elements(dims)) * sizeof(int32_t)));
}

TensorPtr int64_scalar(int64_t value) {
  TensorPtr t(TF_AllocateTensor(TF_INT64, nullptr, 0, sizeof(int64_t)));
  std::memcpy(TF_TensorData(t.get()), &value, sizeof value);
  return t;
}

TensorPtr borrowed_tensor(float* data, const std::vector<int64_t>& dims) {
  // The plugin owns the memory: TensorFlow's deallocator has nothing to free.
  return TensorPtr(TF_NewTensor(
      TF_FLOAT, dims.data(), static_cast<int>(dims.size()), data,
      static_cast<size_t>(elements(dims)) * sizeof(float), [](void*, size_t, void*) {}, nullptr));
}

namespace {
thread_local const std::function<std::string(const std::string&)>* device_for = nullptr;
}  // namespace

DeviceScope::DeviceScope(std::function<std::string(const std::string& op)> f) {
  device_for = new std::function<std::string(const std::string&)>(std::move(f));
}
DeviceScope::~DeviceScope() {
  delete device_for;
  device_for = nullptr;
}

Op::Op(TF_Graph* graph, const char* type, const std::string& name)
    : desc_(TF_NewOperation(graph, type, name.c_str())), name_(name) {
  if (device_for != nullptr)
    if (const std::string device = (*device_for)(name); !device.empty())
      TF_SetDevice(desc_, device.c_str());
}

Op& Op::in(TF_Output x) {
  TF_AddInput(desc_, x);
  return *this;
}
Op& Op::ins(const std::vector<TF_Output>& xs) {
  TF_AddInputList(desc_, xs.data(), static_cast<int>(xs.size()));
  return *this;
}
Op& Op::after(TF_Operation* op) {
  TF_AddControlInput(desc_, op);
  return *this;
}
Op& Op::attr(const char* name, int64_t v) {
  TF_SetAttrInt(desc_, name, v);
  return *this;
}
Op& Op::attr(const char* name, float v) {
  TF_SetAttrFloat(desc_, name, v);
  return *this;
}
Op& Op::attr(const char* name, bool v) {
  TF_SetAttrBool(desc_, name, v ? 1 : 0);
  return *this;
}
Op& Op::attr(const char* name, const char* v) {
  TF_SetAttrString(desc_, name, v, std::strlen(v));
  return *this;
}
Op& Op::attr(const char* name, TF_DataType v) {
  TF_SetAttrType(desc_, name, v);
  return *this;
}
Op& Op::attr_ints(const char* name, const std::vector<int64_t>& v) {
  TF_SetAttrIntList(desc_, name, v.data(), static_cast<int>(v.size()));
  return *this;
}
Op& Op::attr_types(const char* name, const std::vector<TF_DataType>& v) {
  TF_SetAttrTypeList(desc_, name, v.data(), static_cast<int>(v.size()));
  return *this;
}
Op& Op::shape(const char* name, const std::vector<int64_t>& dims) {
  TF_SetAttrShape(desc_, name, dims.data(), static_cast<int>(dims.size()));
  return *this;
}
Op& Op::tensor(const char* name, TF_Tensor* value) {
  StatusPtr status(TF_NewStatus());
  TF_SetAttrTensor(desc_, name, value, status.get());
  check(status.get(), "attribute " + std::string(name) + " of " + name_);
  return *this;
}

TF_Operation* Op::finish() {
  if (done_ != nullptr) return done_;
  StatusPtr status(TF_NewStatus());
  done_ = TF_FinishOperation(desc_, status.get());
  check(status.get(), "adding " + name_);
  return done_;
}

namespace pb {
namespace {

// Protocol buffer wire format: varint-encoded key (field << 3 | wire type) and value.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

}  // namespace

void int_field(std::string& out, int field, uint64_t v) {
  varint(out, static_cast<uint64_t>(field) << 3);
  varint(out, v);
}
void bytes_field(std::string& out, int field, const std::string& body) {
  varint(out, static_cast<uint64_t>(field) << 3 | 2);
  varint(out, body.size());
  out += body;
}

}  // namespace pb

std::string config_proto(int32_t intra_op_threads, int32_t inter_op_threads, bool xla_jit) {
  using pb::bytes_field;
  using pb::int_field;
  std::string config;
  if (intra_op_threads > 0) int_field(config, 2, uint64_t(intra_op_threads));  // intra_op_...
  if (inter_op_threads > 0) int_field(config, 5, uint64_t(inter_op_threads));  // inter_op_...
  if (xla_jit) {
    std::string optimizer;
    int_field(optimizer, 5, 1);  // OptimizerOptions.global_jit_level = ON_1
    int_field(optimizer, 7, 1);  // OptimizerOptions.cpu_global_jit = true
    std::string graph;
    bytes_field(graph, 3, optimizer);  // GraphOptions.optimizer_options
    bytes_field(config, 10, graph);    // ConfigProto.graph_options
  }
  return config;
}

}  // namespace dlhost::cpu_tensorflow::tf
