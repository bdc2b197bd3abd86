// plugin.cpp — the networks_transformer plugin's tables: BERT-base and GPT-2 small with their
// published sizes, tiny variants of each for tests, their batch sizes and AdamW settings, and the
// entry symbol. The layers are in transformer.cpp. No mutable state: thread-safe.
#include <vector>

#include "transformer.h"

namespace dlhost::networks_transformer {
namespace {

constexpr const char* kPluginName = "networks_transformer";

// AdamW with decoupled weight decay (dlhost_backend.h); applied to every parameter, biases and
// LayerNorm included (Hugging Face's examples exempt those: docs/networks.md says so).
dlhost_optimizer_desc adamw(float lr, float weight_decay, float epsilon) {
  auto o = sdk::make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  o.kind = DLHOST_OPTIMIZER_ADAMW;
  o.learning_rate = lr;
  o.weight_decay = weight_decay;
  o.beta1 = 0.9f;
  o.beta2 = 0.999f;
  o.epsilon = epsilon;
  return o;
}

struct Network {
  dlhost_network_info info;
  dlhost_optimizer_desc optimizer;
  Shape shape;
};

Network make(const char* name, const char* dataset, int64_t cpu_batch, int64_t gpu_batch,
             dlhost_optimizer_desc optimizer, Shape shape, const char* description) {
  Network n{};
  n.info.struct_size = DLHOST_NETWORK_INFO_STRUCT_SIZE;
  n.info.name = name;
  n.info.description = description;
  n.info.dataset = dataset;
  n.info.cpu_batch = cpu_batch;
  n.info.gpu_batch = gpu_batch;
  n.optimizer = optimizer;
  n.shape = shape;
  return n;
}

const std::vector<Network>& networks() {
  static const std::vector<Network> list = [] {
    std::vector<Network> v;
    //                 layers hidden heads ffn   vocab  max_pos seq  decoder
    const Shape bert{12, 768, 12, 3072, 30522, 512, 128, false};
    const Shape gpt2{12, 768, 12, 3072, 50257, 1024, 1024, true};
    const Shape bert_tiny{2, 64, 4, 256, 1000, 64, 32, false};
    const Shape gpt2_tiny{2, 64, 4, 256, 1000, 64, 32, true};
    v.push_back(make(
        "bert_base", "synthetic token ids", 8, 32, adamw(1e-4f, 0.01f, 1e-6f), bert,
        "BERT-base (Devlin et al.) pre-training with the masked-LM head: 12 post-LN layers of "
        "768, 12 heads, FFN 3072, erf GELU, vocab 30522, 512 positions, sequence 128 (option "
        "seq), dropout 0.1 (option dropout); MLM head dense+GELU+LayerNorm and a decoder tied to "
        "the word embeddings with its own bias; no token-type embeddings, no pooler (NSP is not "
        "trained); 109,512,762 parameters (docs/networks.md). AdamW lr 1e-4, wd 0.01, eps 1e-6."));
    v.push_back(
        make("gpt2", "synthetic token ids", 2, 8, adamw(2.5e-4f, 0.01f, 1e-8f), gpt2,
             "GPT-2 small (Radford et al.): 12 pre-LN decoder layers of 768, 12 heads, FFN 3072, "
             "tanh GELU, causal attention, vocab 50257, context 1024 (option seq shortens it), "
             "dropout 0.1, final LayerNorm, output layer tied to the token embeddings; 124,439,808 "
             "parameters as the published model. AdamW lr 2.5e-4, wd 0.01."));
    v.push_back(make("bert_tiny", "synthetic token ids", 8, 8, adamw(1e-3f, 0.01f, 1e-6f),
                     bert_tiny,
                     "BERT as bert_base at test size: 2 layers of 64, 4 heads, FFN 256, vocab "
                     "1000, 64 positions, sequence 32 (173,480 parameters)."));
    v.push_back(make("gpt2_tiny", "synthetic token ids", 8, 8, adamw(1e-3f, 0.01f, 1e-8f),
                     gpt2_tiny,
                     "GPT-2 as gpt2 at test size: 2 layers of 64, 4 heads, FFN 256, vocab 1000, "
                     "context 64, sequence 32 (168,192 parameters)."));
    // Moving the vector out keeps its element buffer, so these pointers stay valid.
    for (auto& n : v) n.info.optimizer = &n.optimizer;
    return v;
  }();
  return list;
}

int32_t count() { return static_cast<int32_t>(networks().size()); }

const Network& at(int32_t index) {
  if (index < 0 || index >= count())
    sdk::fail(DLHOST_CODE_OUT_OF_RANGE, "no network " + std::to_string(index));
  return networks()[static_cast<size_t>(index)];
}

dlhost_status* info(int32_t index, const dlhost_network_info** out) {
  return sdk::guard([&] {
    if (out == nullptr) sdk::invalid("NULL out");
    *out = &at(index).info;
  });
}

dlhost_status* build_network(int32_t index, const dlhost_builder_api* api,
                             dlhost_graph_builder* builder, const dlhost_options* options) {
  return sdk::guard([&] {
    if (api == nullptr || !DLHOST_HAS_FIELD(api, dlhost_builder_api, tied_fc))
      sdk::unimplemented("the host's graph builder predates the Transformer's ops (ABI 1.4)");
    sdk::Builder b(api, builder);
    build(b, at(index).shape, options);
  });
}

const dlhost_network_api kNetworkApi = {DLHOST_NETWORK_API_STRUCT_SIZE, count, info, build_network};

dlhost_plugin make_plugin() {
  auto p = sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
  p.abi_major = DLHOST_ABI_MAJOR;
  p.abi_minor = DLHOST_ABI_MINOR;
  p.kind = DLHOST_PLUGIN_NETWORK;
  p.name = kPluginName;
  p.version = "0.1.0";
  p.description =
      "Transformers beyond the paper: BERT-base (masked LM), GPT-2 small, and tiny "
      "variants of each for tests";
  p.network = &kNetworkApi;
  return p;
}

}  // namespace
}  // namespace dlhost::networks_transformer

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  using namespace dlhost::networks_transformer;
  if (!dlhost::sdk::attach_host(host, kPluginName)) return nullptr;
  static const dlhost_plugin plugin = make_plugin();
  return &plugin;
}
