// conform_problems.cpp — see conform_problems.h. The problem lists are written as the canonical
// strings a run prints (test_conform checks they are canonical and build), so what a reader sees
// here is what a vendor pastes back.
#include "conform/conform_problems.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>

#include "core/graph.h"
#include "core/host_api.h"

namespace dlhost::conform {

namespace {

// --- the keys of each op -----------------------------------------------------------------------

enum class Type { kInt, kFloat, kShape, kChoice, kName };

struct Key {
  const char* key;
  Type type;
  const char* fallback;
  const char* choices;  // kChoice: "max|avg"
};

struct Schema {
  const char* name;
  std::vector<Key> keys;  // after the leading op=/net= key
};

// Short names follow benchdnn's habit (n c h w, k s p d g); ceil = ceil_mode, cip =
// count_include_pad, bd = the FC's batch_dims.
// long-function: a data table, one entry per op; split, it would scatter the table.
const std::vector<Schema>& op_schemas() {
  static const std::vector<Schema> schemas = {
      {"conv2d",
       {{"n", Type::kInt, "2", nullptr},
        {"c", Type::kInt, "3", nullptr},
        {"h", Type::kInt, "7", nullptr},
        {"w", Type::kInt, "7", nullptr},
        {"oc", Type::kInt, "4", nullptr},
        {"k", Type::kInt, "3", nullptr},
        {"s", Type::kInt, "1", nullptr},
        {"p", Type::kInt, "1", nullptr},
        {"d", Type::kInt, "1", nullptr},
        {"g", Type::kInt, "1", nullptr},
        {"bias", Type::kChoice, "1", "0|1"}}},
      {"pool2d",
       {{"n", Type::kInt, "2", nullptr},
        {"c", Type::kInt, "3", nullptr},
        {"h", Type::kInt, "8", nullptr},
        {"w", Type::kInt, "8", nullptr},
        {"kind", Type::kChoice, "max", "max|avg"},
        {"k", Type::kInt, "2", nullptr},
        {"s", Type::kInt, "2", nullptr},
        {"p", Type::kInt, "0", nullptr},
        {"ceil", Type::kChoice, "0", "0|1"},
        {"cip", Type::kChoice, "1", "0|1"}}},
      {"fc",
       {{"shape", Type::kShape, "3x10", nullptr},
        {"out", Type::kInt, "5", nullptr},
        {"bias", Type::kChoice, "1", "0|1"},
        {"bd", Type::kChoice, "1", "1|2"}}},
      {"activation",
       {{"kind", Type::kChoice, "relu", "relu|sigmoid|tanh"},
        {"shape", Type::kShape, "2x3x5x4", nullptr}}},
      {"softmax_cross_entropy", {{"shape", Type::kShape, "4x10", nullptr}}},
      {"mse_loss", {{"shape", Type::kShape, "3x5", nullptr}}},
      {"batch_norm",
       {{"shape", Type::kShape, "4x3x5x5", nullptr},
        {"eps", Type::kFloat, "1e-05", nullptr},
        {"momentum", Type::kFloat, "0.1", nullptr}}},
      {"dropout",
       {{"shape", Type::kShape, "2x3x4x4", nullptr}, {"p", Type::kFloat, "0.3", nullptr}}},
      {"add", {{"shape", Type::kShape, "2x3x5x5", nullptr}}},
      {"lrn",
       {{"shape", Type::kShape, "2x7x5x5", nullptr},
        {"size", Type::kInt, "5", nullptr},
        {"alpha", Type::kFloat, "1", nullptr},
        {"beta", Type::kFloat, "0.75", nullptr},
        {"k", Type::kFloat, "2", nullptr}}},
      {"embedding",
       {{"n", Type::kInt, "2", nullptr},
        {"t", Type::kInt, "5", nullptr},
        {"vocab", Type::kInt, "11", nullptr},
        {"dim", Type::kInt, "6", nullptr}}},
      {"lstm",
       {{"n", Type::kInt, "2", nullptr},
        {"t", Type::kInt, "4", nullptr},
        {"c", Type::kInt, "5", nullptr},
        {"hidden", Type::kInt, "6", nullptr},
        {"layers", Type::kInt, "1", nullptr}}},
      {"global_avg_pool", {{"shape", Type::kShape, "2x4x5x3", nullptr}}},
      // ABI 1.4: the Transformer's ops. attention: c = heads x d; tied_fc: the output layer
      // tied to an embedding of `vocab` x `dim`.
      {"layer_norm",
       {{"shape", Type::kShape, "2x3x8", nullptr}, {"eps", Type::kFloat, "1e-05", nullptr}}},
      {"gelu",
       {{"kind", Type::kChoice, "erf", "erf|tanh"}, {"shape", Type::kShape, "2x3x8", nullptr}}},
      {"attention",
       {{"n", Type::kInt, "2", nullptr},
        {"t", Type::kInt, "5", nullptr},
        {"c", Type::kInt, "8", nullptr},
        {"heads", Type::kInt, "2", nullptr},
        {"causal", Type::kChoice, "1", "0|1"},
        {"p", Type::kFloat, "0", nullptr}}},
      {"position_embedding",
       {{"n", Type::kInt, "2", nullptr},
        {"t", Type::kInt, "5", nullptr},
        {"c", Type::kInt, "4", nullptr},
        {"max", Type::kInt, "7", nullptr}}},
      {"tied_fc",
       {{"n", Type::kInt, "2", nullptr},
        {"t", Type::kInt, "4", nullptr},
        {"vocab", Type::kInt, "11", nullptr},
        {"dim", Type::kInt, "6", nullptr},
        {"bias", Type::kChoice, "1", "0|1"}}},
  };
  return schemas;
}

const Schema& network_schema() {
  static const Schema schema = {
      "net", {{"batch", Type::kInt, "2", nullptr}, {"steps", Type::kInt, "3", nullptr}}};
  return schema;
}

const Schema* find_schema(const std::string& op) {
  for (const auto& s : op_schemas())
    if (op == s.name) return &s;
  return nullptr;
}

// --- the problems, as canonical strings --------------------------------------------------------

// Small: seconds on a naive reference, yet every odd corner: odd and non-square sizes, stride
// larger than 1 with and without padding, dilation, groups and depthwise, batch 1, ceil-mode
// windows clipped at the border, count_include_pad both ways, rank-2/3/4 element-wise ops.
const std::map<std::string, std::vector<const char*>>& small_problems() {
  static const std::map<std::string, std::vector<const char*>> m = {
      {"conv2d",
       {"op=conv2d,n=2,c=3,h=7,w=7,oc=4,k=3,s=1,p=1,d=1,g=1,bias=1",
        "op=conv2d,n=3,c=5,h=9,w=7,oc=4,k=3,s=2,p=1,d=2,g=1,bias=1",
        "op=conv2d,n=1,c=4,h=6,w=5,oc=6,k=3,s=1,p=0,d=1,g=2,bias=0",
        "op=conv2d,n=2,c=3,h=11,w=10,oc=5,k=5,s=3,p=2,d=1,g=1,bias=1",
        "op=conv2d,n=2,c=6,h=5,w=5,oc=6,k=3,s=1,p=1,d=1,g=6,bias=1",
        "op=conv2d,n=2,c=4,h=5,w=3,oc=3,k=1,s=1,p=0,d=1,g=1,bias=1",
        "op=conv2d,n=2,c=2,h=8,w=8,oc=3,k=4,s=4,p=0,d=1,g=1,bias=1",
        // LeNet's conv2: channels that fill few of a blocked layout's lanes, which cpu_onednn
        // runs channels-last (brgemm forward on AVX-512).
        "op=conv2d,n=2,c=20,h=12,w=12,oc=50,k=5,s=1,p=0,d=1,g=1,bias=1",
        // AlexNet's conv4 at a small batch: a wide 3x3 layer, where cpu_onednn lets oneDNN pick
        // Winograd when it expects it to be faster (at this batch: the weight gradient).
        "op=conv2d,n=4,c=256,h=13,w=13,oc=256,k=3,s=1,p=1,d=1,g=1,bias=1"}},
      {"pool2d",
       {"op=pool2d,n=2,c=3,h=8,w=8,kind=max,k=2,s=2,p=0,ceil=0,cip=1",
        "op=pool2d,n=2,c=3,h=9,w=7,kind=max,k=3,s=2,p=1,ceil=0,cip=1",
        "op=pool2d,n=1,c=2,h=6,w=6,kind=max,k=3,s=2,p=0,ceil=1,cip=1",
        "op=pool2d,n=2,c=3,h=7,w=7,kind=avg,k=3,s=2,p=1,ceil=0,cip=1",
        "op=pool2d,n=2,c=3,h=7,w=7,kind=avg,k=3,s=2,p=1,ceil=0,cip=0",
        "op=pool2d,n=2,c=2,h=5,w=5,kind=avg,k=2,s=2,p=0,ceil=1,cip=1",
        "op=pool2d,n=2,c=2,h=5,w=5,kind=avg,k=2,s=2,p=0,ceil=1,cip=0",
        "op=pool2d,n=2,c=2,h=6,w=8,kind=avg,k=3,s=3,p=1,ceil=1,cip=1",
        "op=pool2d,n=2,c=2,h=6,w=8,kind=avg,k=3,s=3,p=1,ceil=1,cip=0",
        // Channel-blocked layout (c >= 8) and a ceil-mode overhang without padding, as
        // AlexNet-R's pool3: cpu_onednn pools it with no divisor fix-up step.
        "op=pool2d,n=2,c=16,h=8,w=8,kind=avg,k=3,s=2,p=0,ceil=1,cip=1"}},
      {"fc",
       {"op=fc,shape=3x10,out=5,bias=1,bd=1", "op=fc,shape=1x7,out=4,bias=0,bd=1",
        "op=fc,shape=2x3x4x4,out=6,bias=1,bd=1", "op=fc,shape=2x5x6,out=3,bias=1,bd=1",
        "op=fc,shape=2x5x6,out=4,bias=1,bd=2"}},
      {"activation",
       {"op=activation,kind=relu,shape=2x3x5x4", "op=activation,kind=sigmoid,shape=2x3x5x4",
        "op=activation,kind=tanh,shape=2x3x5x4", "op=activation,kind=relu,shape=3x7",
        "op=activation,kind=tanh,shape=2x4x6"}},
      {"softmax_cross_entropy",
       {"op=softmax_cross_entropy,shape=4x10", "op=softmax_cross_entropy,shape=1x5",
        "op=softmax_cross_entropy,shape=2x5x7"}},
      {"mse_loss", {"op=mse_loss,shape=3x5", "op=mse_loss,shape=2x3x4x4"}},
      {"batch_norm",
       {"op=batch_norm,shape=4x3x5x5,eps=1e-05,momentum=0.1",
        "op=batch_norm,shape=1x4x3x3,eps=1e-05,momentum=0.1",
        "op=batch_norm,shape=8x6,eps=0.001,momentum=0.1"}},
      {"dropout", {"op=dropout,shape=2x3x4x4,p=0.3", "op=dropout,shape=4x9,p=0.5"}},
      {"add", {"op=add,shape=2x3x5x5", "op=add,shape=3x8"}},
      {"lrn",
       {"op=lrn,shape=2x7x5x5,size=5,alpha=1,beta=0.75,k=2",
        "op=lrn,shape=2x7x5x5,size=5,alpha=0.0001,beta=0.75,k=1",
        "op=lrn,shape=1x2x4x4,size=3,alpha=0.5,beta=0.75,k=1"}},
      {"embedding",
       {"op=embedding,n=2,t=5,vocab=11,dim=6", "op=embedding,n=3,t=4,vocab=3,dim=4",
        "op=embedding,n=1,t=1,vocab=7,dim=5"}},
      {"lstm",
       {"op=lstm,n=2,t=4,c=5,hidden=6,layers=1", "op=lstm,n=2,t=3,c=4,hidden=5,layers=2",
        "op=lstm,n=1,t=5,c=3,hidden=4,layers=1"}},
      {"global_avg_pool", {"op=global_avg_pool,shape=2x4x5x3", "op=global_avg_pool,shape=1x3x7x7"}},
      {"layer_norm",
       {"op=layer_norm,shape=2x3x8,eps=1e-05", "op=layer_norm,shape=4x7,eps=1e-12",
        "op=layer_norm,shape=1x5x3,eps=0.001"}},
      {"gelu",
       {"op=gelu,kind=erf,shape=2x3x8", "op=gelu,kind=tanh,shape=2x3x8",
        "op=gelu,kind=tanh,shape=3x7"}},
      {"attention",
       {"op=attention,n=2,t=5,c=8,heads=2,causal=1,p=0",
        "op=attention,n=2,t=4,c=6,heads=3,causal=0,p=0",
        "op=attention,n=1,t=6,c=4,heads=1,causal=1,p=0.25",
        "op=attention,n=2,t=3,c=8,heads=4,causal=0,p=0.5"}},
      {"position_embedding",
       {"op=position_embedding,n=2,t=5,c=4,max=7", "op=position_embedding,n=1,t=3,c=6,max=3"}},
      {"tied_fc",
       {"op=tied_fc,n=2,t=4,vocab=11,dim=6,bias=1", "op=tied_fc,n=1,t=3,vocab=5,dim=4,bias=0"}},
  };
  return m;
}

// Medium: the shapes of the paper's networks (AlexNet's first layers, ResNet's 3x3 and 1x1,
// an LSTM language model step) at a few samples, for a backend whose kernels change with size.
const std::map<std::string, std::vector<const char*>>& medium_problems() {
  static const std::map<std::string, std::vector<const char*>> m = {
      {"conv2d",
       {"op=conv2d,n=4,c=16,h=28,w=28,oc=32,k=3,s=1,p=1,d=1,g=1,bias=1",
        "op=conv2d,n=2,c=3,h=67,w=67,oc=16,k=11,s=4,p=2,d=1,g=1,bias=1",
        "op=conv2d,n=2,c=32,h=15,w=13,oc=32,k=3,s=2,p=1,d=2,g=4,bias=1",
        "op=conv2d,n=4,c=24,h=14,w=14,oc=24,k=3,s=1,p=1,d=1,g=24,bias=0",
        "op=conv2d,n=4,c=64,h=7,w=7,oc=32,k=1,s=1,p=0,d=1,g=1,bias=1"}},
      {"pool2d",
       {"op=pool2d,n=4,c=16,h=55,w=55,kind=max,k=3,s=2,p=0,ceil=0,cip=1",
        "op=pool2d,n=4,c=16,h=32,w=32,kind=avg,k=3,s=2,p=1,ceil=1,cip=0",
        "op=pool2d,n=4,c=8,h=28,w=28,kind=max,k=2,s=2,p=0,ceil=0,cip=1",
        "op=pool2d,n=4,c=8,h=27,w=27,kind=avg,k=3,s=2,p=1,ceil=0,cip=1"}},
      {"fc",
       {"op=fc,shape=16x256,out=128,bias=1,bd=1", "op=fc,shape=4x16x7x7,out=64,bias=1,bd=1",
        "op=fc,shape=4x20x32,out=50,bias=1,bd=2"}},
      {"activation",
       {"op=activation,kind=relu,shape=8x16x14x14", "op=activation,kind=sigmoid,shape=8x16x14x14",
        "op=activation,kind=tanh,shape=16x256"}},
      {"softmax_cross_entropy",
       {"op=softmax_cross_entropy,shape=32x1000", "op=softmax_cross_entropy,shape=4x20x100"}},
      {"mse_loss", {"op=mse_loss,shape=16x784"}},
      {"batch_norm",
       {"op=batch_norm,shape=8x32x14x14,eps=1e-05,momentum=0.1",
        "op=batch_norm,shape=32x256,eps=1e-05,momentum=0.1"}},
      {"dropout", {"op=dropout,shape=16x512,p=0.5", "op=dropout,shape=4x16x14x14,p=0.2"}},
      {"add", {"op=add,shape=4x32x14x14"}},
      {"lrn", {"op=lrn,shape=4x32x13x13,size=5,alpha=1,beta=0.75,k=2"}},
      {"embedding", {"op=embedding,n=8,t=35,vocab=1000,dim=64"}},
      {"lstm", {"op=lstm,n=4,t=20,c=64,hidden=64,layers=2"}},
      {"global_avg_pool", {"op=global_avg_pool,shape=8x64x7x7"}},
      {"layer_norm", {"op=layer_norm,shape=4x32x64,eps=1e-05"}},
      {"gelu", {"op=gelu,kind=tanh,shape=4x32x256", "op=gelu,kind=erf,shape=4x32x256"}},
      {"attention", {"op=attention,n=2,t=64,c=64,heads=4,causal=1,p=0.1"}},
      {"position_embedding", {"op=position_embedding,n=4,t=32,c=64,max=64"}},
      {"tied_fc", {"op=tied_fc,n=4,t=16,vocab=1000,dim=64,bias=1"}},
  };
  return m;
}

// --- parsing -----------------------------------------------------------------------------------

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string keys_of(const Schema& s) {
  std::string out;
  for (const auto& k : s.keys) {
    out += (out.empty() ? "" : " ") + std::string(k.key) + "=" + k.fallback;
    if (k.type == Type::kChoice) out += std::string(" (") + k.choices + ")";
  }
  return out;
}

// The value as the canonical string prints it, or a DescriptorError.
std::string canonical_value(const std::string& where, const Key& k, const std::string& v) {
  auto bad = [&](const std::string& what) -> DescriptorError {
    return DescriptorError(where + ": " + k.key + "=" + v + ": " + what);
  };
  switch (k.type) {
    case Type::kName:
      if (v.empty()) throw bad("needs a name");
      return v;
    case Type::kInt: {
      char* end = nullptr;
      errno = 0;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0) throw bad("not an integer");
      if (n < 0) throw bad("must be >= 0");
      return std::to_string(n);
    }
    case Type::kFloat: {
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !std::isfinite(d)) throw bad("not a number");
      return format_double(d);
    }
    case Type::kShape: {
      std::string out;
      size_t start = 0;
      while (start <= v.size()) {
        size_t x = v.find('x', start);
        std::string part = v.substr(start, x == std::string::npos ? std::string::npos : x - start);
        char* end = nullptr;
        long long n = std::strtoll(part.c_str(), &end, 10);
        if (part.empty() || *end != '\0' || n <= 0)
          throw bad("a shape is positive sizes joined by 'x', batch first: 2x3x5x5");
        out += (out.empty() ? "" : "x") + std::to_string(n);
        if (x == std::string::npos) break;
        start = x + 1;
      }
      return out;
    }
    case Type::kChoice: {
      std::string choices = k.choices;
      size_t start = 0;
      while (true) {
        size_t bar = choices.find('|', start);
        if (choices.substr(start, bar == std::string::npos ? std::string::npos : bar - start) == v)
          return v;
        if (bar == std::string::npos) break;
        start = bar + 1;
      }
      throw bad(std::string("must be one of ") + k.choices);
    }
  }
  return v;
}

// --- graph pieces ----------------------------------------------------------------------------

dlhost_fc_attrs fc_attrs(int64_t out, bool bias, int32_t batch_dims) {
  dlhost_fc_attrs a{};
  a.struct_size = DLHOST_FC_ATTRS_STRUCT_SIZE;
  a.out_features = out;
  a.has_bias = bias ? 1 : 0;
  a.batch_dims = batch_dims;
  return a;
}

// A learnable layer that keeps the shape of `x` ([N, C, H, W]: a 1x1 convolution; [N, F]: a fully
// connected layer; [N, T, F]: a per-step fully connected layer), so the gradient that reaches `x`
// is checked through this layer's weight (and bias) gradients.
int32_t shape_keeping_layer(GraphBuilder& b, const std::string& name, int32_t x,
                            const std::vector<int64_t>& dims, bool bias = true) {
  if (dims.size() == 4) {
    dlhost_conv2d_attrs a{};
    a.struct_size = DLHOST_CONV2D_ATTRS_STRUCT_SIZE;
    a.out_channels = dims[1];
    a.kernel_h = a.kernel_w = 1;
    a.stride_h = a.stride_w = 1;
    a.dilation_h = a.dilation_w = 1;
    a.groups = 1;
    a.has_bias = bias ? 1 : 0;
    return b.conv2d(name, x, a);
  }
  if (dims.size() == 2) return b.fc(name, x, fc_attrs(dims[1], bias, 1));
  if (dims.size() == 3) return b.fc(name, x, fc_attrs(dims[2], bias, 2));
  throw DescriptorError("shape of rank " + std::to_string(dims.size()) +
                        ": these problems take rank 2, 3 or 4");
}

// The probe and the loss behind an op without a loss of its own.
void probe_and_loss(GraphBuilder& b, int32_t y) {
  constexpr int64_t kProbeOutputs = 3;
  int32_t z = b.fc("probe", y, fc_attrs(kProbeOutputs, false, 1));
  int32_t target = b.input("target", DLHOST_DTYPE_F32, {kProbeOutputs});
  b.mse_loss("loss", z, target);
}

std::vector<int64_t> per_sample(const std::vector<int64_t>& dims) {
  return std::vector<int64_t>(dims.begin() + 1, dims.end());
}

void require_rank(const Descriptor& d, const std::vector<int64_t>& dims,
                  std::initializer_list<size_t> ranks) {
  for (size_t r : ranks)
    if (dims.size() == r) return;
  std::string allowed;
  for (size_t r : ranks) allowed += (allowed.empty() ? "" : " or ") + std::to_string(r);
  throw DescriptorError(d.str() + ": shape must have rank " + allowed + " (batch first)");
}

}  // namespace

// --- Descriptor --------------------------------------------------------------------------------

const std::string& Descriptor::get(const std::string& key) const {
  for (const auto& [k, v] : fields_)
    if (k == key) return v;
  throw DescriptorError(str() + ": no key '" + key + "'");
}

int64_t Descriptor::get_int(const std::string& key) const { return std::stoll(get(key)); }
double Descriptor::get_double(const std::string& key) const { return std::stod(get(key)); }

std::vector<int64_t> Descriptor::get_shape(const std::string& key) const {
  std::vector<int64_t> dims;
  const std::string& v = get(key);
  size_t start = 0;
  while (true) {
    size_t x = v.find('x', start);
    dims.push_back(std::stoll(v.substr(start, x == std::string::npos ? x : x - start)));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  return dims;
}

std::string Descriptor::str() const {
  std::string s;
  for (const auto& [k, v] : fields_) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

Descriptor parse_descriptor(const std::string& text) {
  // Split into key=value items, refusing duplicates and items without '='.
  std::vector<std::pair<std::string, std::string>> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw DescriptorError("'" + text + "': '" + item + "' is not key=value");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    for (const auto& [k, v] : items)
      if (k == key) throw DescriptorError("'" + text + "': key '" + key + "' given twice");
    items.emplace_back(key, value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }

  const Schema* schema = nullptr;
  std::string lead, name;
  for (const auto& [k, v] : items) {
    if (k == "op") {
      schema = find_schema(v);
      if (schema == nullptr) {
        std::string ops;
        for (const auto& o : op_names()) ops += (ops.empty() ? "" : ", ") + o;
        throw DescriptorError("'" + text + "': unknown op '" + v + "'; the ops are " + ops);
      }
    } else if (k == "net") {
      if (v.empty()) throw DescriptorError("'" + text + "': net= needs a network name");
      schema = &network_schema();
    } else {
      continue;
    }
    if (!lead.empty()) throw DescriptorError("'" + text + "': give op= or net=, not both");
    lead = k;
    name = v;
  }
  if (schema == nullptr)
    throw DescriptorError("'" + text + "': a descriptor names op=OP or net=NETWORK");

  Descriptor d;
  d.fields_.emplace_back(lead, name);
  for (const auto& [k, v] : items) {
    if (k == lead) continue;
    bool known = false;
    for (const auto& key : schema->keys) known = known || k == key.key;
    if (!known)
      throw DescriptorError("'" + text + "': " + lead + "=" + name + " has no key '" + k +
                            "'; its keys (with defaults): " + keys_of(*schema));
  }
  for (const auto& key : schema->keys) {
    std::string value = key.fallback;
    for (const auto& [k, v] : items)
      if (k == key.key) value = v;
    d.fields_.emplace_back(key.key, canonical_value("'" + text + "'", key, value));
  }
  return d;
}

Descriptor network_descriptor(const std::string& network, int64_t batch, int64_t steps) {
  return parse_descriptor("net=" + network + ",batch=" + std::to_string(batch) +
                          ",steps=" + std::to_string(steps));
}

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& s : op_schemas()) n.push_back(s.name);
    return n;
  }();
  return names;
}

std::string op_keys_help(const std::string& op) {
  const Schema* s = op == "net" ? &network_schema() : find_schema(op);
  return s == nullptr ? "" : keys_of(*s);
}

std::vector<Descriptor> op_problems(const std::string& op, Shapes shapes) {
  const auto& lists = shapes == Shapes::kSmall ? small_problems() : medium_problems();
  std::vector<Descriptor> out;
  auto it = lists.find(op);
  if (it == lists.end()) return out;
  for (const char* text : it->second) out.push_back(parse_descriptor(text));
  return out;
}

// --- graphs --------------------------------------------------------------------------------------

// conv2d or pool2d on `a`, with the descriptor's attributes.
int32_t add_spatial_op(GraphBuilder& b, const Descriptor& d, int32_t a) {
  if (d.name() == "conv2d") {
    dlhost_conv2d_attrs c{};
    c.struct_size = DLHOST_CONV2D_ATTRS_STRUCT_SIZE;
    c.out_channels = d.get_int("oc");
    c.kernel_h = c.kernel_w = d.get_int("k");
    c.stride_h = c.stride_w = d.get_int("s");
    c.pad_h = c.pad_w = d.get_int("p");
    c.dilation_h = c.dilation_w = d.get_int("d");
    c.groups = d.get_int("g");
    c.has_bias = static_cast<int32_t>(d.get_int("bias"));
    return b.conv2d("op", a, c);
  }
  dlhost_pool2d_attrs p{};
  p.struct_size = DLHOST_POOL2D_ATTRS_STRUCT_SIZE;
  p.kind = d.get("kind") == "max" ? DLHOST_POOL_MAX : DLHOST_POOL_AVG;
  p.kernel_h = p.kernel_w = d.get_int("k");
  p.stride_h = p.stride_w = d.get_int("s");
  p.pad_h = p.pad_w = d.get_int("p");
  p.ceil_mode = static_cast<int32_t>(d.get_int("ceil"));
  p.count_include_pad = static_cast<int32_t>(d.get_int("cip"));
  return b.pool2d("op", a, p);
}

// An op that keeps its input's shape (activation, dropout, batch_norm, lrn, global_avg_pool,
// add) on `a`; dropout marks the graph step-dependent.
int32_t add_shape_keeping_op(GraphBuilder& b, const Descriptor& d, int32_t a,
                             const std::vector<int64_t>& dims, OpGraph& out) {
  const std::string& op = d.name();
  if (op == "activation") {
    dlhost_activation_attrs act{};
    act.struct_size = DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE;
    const std::string& kind = d.get("kind");
    act.kind = kind == "relu"      ? DLHOST_ACTIVATION_RELU
               : kind == "sigmoid" ? DLHOST_ACTIVATION_SIGMOID
                                   : DLHOST_ACTIVATION_TANH;
    return b.activation("op", a, act);
  } else if (op == "dropout") {
    dlhost_dropout_attrs p{};
    p.struct_size = DLHOST_DROPOUT_ATTRS_STRUCT_SIZE;
    p.probability = static_cast<float>(d.get_double("p"));
    out.step_dependent = true;
    return b.dropout("op", a, p);
  } else if (op == "batch_norm") {
    dlhost_batch_norm_attrs bn{};
    bn.struct_size = DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE;
    bn.epsilon = static_cast<float>(d.get_double("eps"));
    bn.momentum = static_cast<float>(d.get_double("momentum"));
    return b.batch_norm("op", a, bn);
  } else if (op == "lrn") {
    dlhost_lrn_attrs l{};
    l.struct_size = DLHOST_LRN_ATTRS_STRUCT_SIZE;
    l.size = d.get_int("size");
    l.alpha = static_cast<float>(d.get_double("alpha"));
    l.beta = static_cast<float>(d.get_double("beta"));
    l.k = static_cast<float>(d.get_double("k"));
    return b.lrn("op", a, l);
  } else if (op == "global_avg_pool") {
    return b.global_avg_pool("op", a);
  } else {
    // A residual block: a + f(a), so `a`'s gradient is the sum of two paths.
    int32_t branch = shape_keeping_layer(b, "branch", a, dims);
    return b.add("op", a, branch);
  }
}

// Every op but the ones reading n= takes the batch from its shape (kept in `dims`).
int64_t problem_batch(const Descriptor& d, std::vector<int64_t>& dims) {
  for (const auto& k : find_schema(d.name())->keys) {
    if (std::string(k.key) != "shape") continue;
    dims = d.get_shape("shape");
    return dims[0];
  }
  return d.get_int("n");
}

namespace {

// ABI 1.4's Transformer ops, each between a learnable layer and the probe (see OpGraph).
void add_transformer_op(GraphBuilder& b, const Descriptor& d, int64_t batch,
                        std::vector<int64_t> dims, OpGraph& out) {
  const std::string& op = d.name();
  if (op == "layer_norm" || op == "gelu") {
    require_rank(d, dims, {2, 3, 4});
    int32_t x = b.input("x", DLHOST_DTYPE_F32, per_sample(dims));
    // LayerNorm subtracts each row's mean: a bias in front has a zero gradient (as batch norm).
    int32_t a = shape_keeping_layer(b, "pre", x, dims, op != "layer_norm");
    int32_t y;
    if (op == "layer_norm") {
      y = b.layer_norm(
          "op", a, {DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE, static_cast<float>(d.get_double("eps"))});
    } else {
      y = b.gelu("op", a,
                 {DLHOST_GELU_ATTRS_STRUCT_SIZE,
                  d.get("kind") == "tanh" ? DLHOST_GELU_TANH : DLHOST_GELU_ERF});
    }
    probe_and_loss(b, y);
  } else if (op == "attention" || op == "position_embedding") {
    dims = {batch, d.get_int("t"), d.get_int("c")};
    int32_t x = b.input("x", DLHOST_DTYPE_F32, per_sample(dims));
    int32_t y;
    if (op == "attention") {
      // q, k and v each through a layer of its own, so each of their gradients shows in a weight.
      int32_t q = shape_keeping_layer(b, "q", x, dims);
      // No bias on k: it adds q . b to every score of a row, which softmax cancels: its gradient
      // is zero up to rounding, and rounding cannot be compared.
      int32_t k = shape_keeping_layer(b, "k", x, dims, false);
      int32_t v = shape_keeping_layer(b, "v", x, dims);
      dlhost_attention_attrs a{DLHOST_ATTENTION_ATTRS_STRUCT_SIZE, d.get_int("heads"),
                               static_cast<int32_t>(d.get_int("causal")),
                               static_cast<float>(d.get_double("p"))};
      out.step_dependent = a.dropout > 0;
      y = b.attention("op", q, k, v, a);
    } else {
      y = b.position_embedding("op", shape_keeping_layer(b, "pre", x, dims),
                               {DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE, d.get_int("max")});
    }
    probe_and_loss(b, y);
  } else {  // tied_fc: ids -> embedding -> a layer -> the output layer tied to the embedding
    int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {d.get_int("t")});
    dlhost_embedding_attrs e{DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE, d.get_int("vocab"),
                             d.get_int("dim")};
    int32_t table_of = b.embedding("embedding", ids, e);
    int32_t a = shape_keeping_layer(b, "pre", table_of, {batch, d.get_int("t"), e.dim});
    probe_and_loss(b, b.tied_fc("op", a, table_of,
                                {DLHOST_TIED_FC_ATTRS_STRUCT_SIZE, -1,
                                 static_cast<int32_t>(d.get_int("bias"))}));
  }
}

bool is_transformer_op(const std::string& op) {
  return op == "layer_norm" || op == "gelu" || op == "attention" || op == "position_embedding" ||
         op == "tied_fc";
}

}  // namespace

OpGraph build_op_graph(const Descriptor& d) {
  if (d.kind() != "op") throw DescriptorError(d.str() + ": not an op problem");
  const std::string& op = d.name();
  OpGraph out;
  try {
    std::vector<int64_t> dims;
    const int64_t batch = problem_batch(d, dims);
    if (batch <= 0) throw DescriptorError(d.str() + ": the mini-batch must be > 0");
    GraphBuilder b("conform_" + op, batch);

    if (op == "conv2d" || op == "pool2d") {
      std::vector<int64_t> in{batch, d.get_int("c"), d.get_int("h"), d.get_int("w")};
      int32_t x = b.input("x", DLHOST_DTYPE_F32, per_sample(in));
      int32_t a = shape_keeping_layer(b, "pre", x, in);
      int32_t y = add_spatial_op(b, d, a);
      probe_and_loss(b, y);
    } else if (op == "fc") {
      require_rank(d, dims, {2, 3, 4});
      int32_t bd = static_cast<int32_t>(d.get_int("bd"));
      if (bd == 2 && dims.size() < 3)
        throw DescriptorError(d.str() + ": bd=2 (per-step) needs a shape N x T x F");
      int32_t x = b.input("x", DLHOST_DTYPE_F32, per_sample(dims));
      int32_t a = shape_keeping_layer(b, "pre", x, dims);
      int32_t y = b.fc("op", a, fc_attrs(d.get_int("out"), d.get_int("bias") != 0, bd));
      probe_and_loss(b, y);
    } else if (op == "activation" || op == "dropout" || op == "batch_norm" || op == "lrn" ||
               op == "global_avg_pool" || op == "add") {
      if (op == "batch_norm") require_rank(d, dims, {2, 4});
      if (op == "lrn" || op == "global_avg_pool") require_rank(d, dims, {4});
      int32_t x = b.input("x", DLHOST_DTYPE_F32, per_sample(dims));
      // Batch norm subtracts the per-channel mean, so a bias in front of it has a gradient of
      // exactly zero: both backends would return rounding noise, which cannot be compared.
      int32_t a = shape_keeping_layer(b, "pre", x, dims, op != "batch_norm");
      int32_t y = add_shape_keeping_op(b, d, a, dims, out);
      probe_and_loss(b, y);
    } else if (op == "softmax_cross_entropy") {
      require_rank(d, dims, {2, 3});
      int32_t x = b.input("x", DLHOST_DTYPE_F32, per_sample(dims));
      int32_t logits = shape_keeping_layer(b, "pre", x, dims);
      std::vector<int64_t> label_dims(dims.begin() + 1, dims.end() - 1);
      int32_t labels = b.input("labels", DLHOST_DTYPE_I32, label_dims);
      b.softmax_cross_entropy("op", logits, labels);
    } else if (op == "mse_loss") {
      require_rank(d, dims, {2, 3, 4});
      int32_t x = b.input("x", DLHOST_DTYPE_F32, per_sample(dims));
      int32_t p = shape_keeping_layer(b, "pre", x, dims);
      int32_t target = b.input("target", DLHOST_DTYPE_F32, per_sample(dims));
      b.mse_loss("op", p, target);
    } else if (op == "embedding") {
      int32_t ids = b.input("ids", DLHOST_DTYPE_I32, {d.get_int("t")});
      dlhost_embedding_attrs e{};
      e.struct_size = DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE;
      e.vocab = d.get_int("vocab");
      e.dim = d.get_int("dim");
      probe_and_loss(b, b.embedding("op", ids, e));
    } else if (op == "lstm") {
      std::vector<int64_t> in{batch, d.get_int("t"), d.get_int("c")};
      int32_t x = b.input("x", DLHOST_DTYPE_F32, per_sample(in));
      int32_t a = shape_keeping_layer(b, "pre", x, in);
      dlhost_lstm_attrs l{};
      l.struct_size = DLHOST_LSTM_ATTRS_STRUCT_SIZE;
      l.hidden = d.get_int("hidden");
      l.layers = d.get_int("layers");
      probe_and_loss(b, b.lstm("op", a, l));
    } else if (is_transformer_op(op)) {
      add_transformer_op(b, d, batch, dims, out);
    } else {
      throw DescriptorError(d.str() + ": no graph for op '" + op + "'");
    }
    out.graph = b.finish();
  } catch (const Error& e) {
    // The builder's own shape checks: the descriptor asks for something the op cannot be.
    throw DescriptorError(d.str() + ": " + e.what());
  }
  out.reduction_length = reduction_length(*out.graph);
  return out;
}

namespace {

int64_t elements(const dlhost_tensor_desc& t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t.rank; ++i) n *= t.dims[i];
  return n;
}

// The longest sum one node's forward or backward pass accumulates, from its first input `in`
// and its output `out` (1 for an element-wise op).
int64_t node_reduction_length(const dlhost_node& n, const dlhost_tensor_desc& in,
                              const dlhost_tensor_desc& out) {
  int64_t node_k = 1;
  switch (n.op) {
    case DLHOST_OP_FC: {
      // Forward: the input features; backward data: the outputs; backward weights: the rows.
      const auto* a = static_cast<const dlhost_fc_attrs*>(n.attrs);
      int64_t rows = 1;
      for (int32_t d = 0; d < a->batch_dims; ++d) rows *= in.dims[d];
      node_k = std::max({elements(in) / rows, a->out_features, rows});
      break;
    }
    case DLHOST_OP_CONV2D: {
      const auto* a = static_cast<const dlhost_conv2d_attrs*>(n.attrs);
      int64_t window = a->kernel_h * a->kernel_w;
      node_k = std::max({in.dims[1] / a->groups * window, a->out_channels / a->groups * window,
                         out.dims[0] * out.dims[2] * out.dims[3]});
      break;
    }
    case DLHOST_OP_POOL2D: {
      const auto* a = static_cast<const dlhost_pool2d_attrs*>(n.attrs);
      node_k = a->kernel_h * a->kernel_w;
      break;
    }
    case DLHOST_OP_BATCH_NORM:
      node_k = elements(in) / in.dims[1];  // N (x H x W) per channel, twice (mean, variance)
      break;
    case DLHOST_OP_LRN:
      node_k = static_cast<const dlhost_lrn_attrs*>(n.attrs)->size;
      break;
    case DLHOST_OP_EMBEDDING:
      node_k = elements(in);  // the rows of one id accumulate over all positions
      break;
    case DLHOST_OP_LSTM: {
      // Back-propagation through time chains T steps of 4H-long gate reductions; the weight
      // gradients sum over N x T.
      int64_t steps = in.dims[1], hidden = out.dims[2];
      node_k = std::max(steps * 4 * std::max(in.dims[2], hidden), in.dims[0] * steps);
      break;
    }
    case DLHOST_OP_GLOBAL_AVG_POOL:
      node_k = in.dims[2] * in.dims[3];
      break;
    case DLHOST_OP_LAYER_NORM:
      node_k = in.dims[in.rank - 1];  // the row statistics; the affine gradients sum the rows
      node_k = std::max(node_k, elements(in) / node_k);
      break;
    case DLHOST_OP_ATTENTION:
      // Scores reduce over d, P V and the key/value gradients over T: at most max(C, T).
      node_k = std::max(in.dims[1], in.dims[2]);
      break;
    case DLHOST_OP_POSITION_EMBEDDING:
      node_k = in.dims[0];  // the table's gradient sums the batch
      break;
    case DLHOST_OP_TIED_FC: {
      // As fc: the features, the vocabulary, the rows.
      const int64_t dim = in.dims[in.rank - 1], vocab = out.dims[out.rank - 1];
      node_k = std::max({dim, vocab, elements(in) / dim});
      break;
    }
    case DLHOST_OP_SOFTMAX_CROSS_ENTROPY: {
      int64_t classes = in.dims[in.rank - 1];
      node_k = std::max(classes, elements(in) / classes);
      break;
    }
    case DLHOST_OP_MSE_LOSS:
      node_k = elements(in);
      break;
    default:
      break;  // element-wise: no reduction
  }
  return node_k;
}

}  // namespace

int64_t reduction_length(const Graph& graph) {
  const dlhost_graph* g = graph.view();
  int64_t k = 1;
  for (int32_t i = 0; i < g->num_nodes; ++i) {
    const dlhost_node& n = *g->nodes[i];
    if (n.num_inputs == 0) continue;
    k = std::max(k, node_reduction_length(n, graph.tensor(n.inputs[0]), graph.tensor(n.output)));
  }
  return k;
}

}  // namespace dlhost::conform
