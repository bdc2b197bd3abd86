// plugin.cpp — the networks_transformer plugin's list: BERT-base and GPT-2 small with their
// published sizes, tiny variants of each for tests, their batch sizes and AdamW settings, and the
// entry symbol; the SDK's network kit fills the tables. The layers are in transformer.cpp.
#include <vector>

#include "transformer.h"

namespace dlhost::networks_transformer {
namespace {

using sdk::adamw_optimizer;

// A network of `shape`, built once the host's builder is known to have the Transformer's ops.
sdk::Network make(const char* name, int64_t cpu_batch, int64_t gpu_batch,
                  dlhost_optimizer_desc optimizer, Shape shape, const char* description) {
  auto build_shape = [shape](sdk::Builder& b, const sdk::Options& options) {
    if (!b.has_transformer_ops())
      sdk::unimplemented("the host's graph builder predates the Transformer's ops (ABI 1.4)");
    build(b, shape, options.raw());
  };
  return {name, "synthetic token ids", cpu_batch, gpu_batch, optimizer, build_shape, description};
}

// Each trains with AdamW, decoupled weight decay (dlhost_backend.h), applied to every parameter,
// biases and LayerNorm included (Hugging Face's examples exempt those: docs/networks.md says so).
std::vector<sdk::Network> networks() {
  std::vector<sdk::Network> v;
  //                 layers hidden heads ffn   vocab  max_pos seq  decoder
  const Shape bert{12, 768, 12, 3072, 30522, 512, 128, false};
  const Shape gpt2{12, 768, 12, 3072, 50257, 1024, 1024, true};
  const Shape bert_tiny{2, 64, 4, 256, 1000, 64, 32, false};
  const Shape gpt2_tiny{2, 64, 4, 256, 1000, 64, 32, true};
  v.push_back(make(
      "bert_base", 8, 32, adamw_optimizer(1e-4f, 0.01f, 1e-6f), bert,
      "BERT-base (Devlin et al.) pre-training with the masked-LM head: 12 post-LN layers of "
      "768, 12 heads, FFN 3072, erf GELU, vocab 30522, 512 positions, sequence 128 (option "
      "seq), dropout 0.1 (option dropout); MLM head dense+GELU+LayerNorm and a decoder tied to "
      "the word embeddings with its own bias; no token-type embeddings, no pooler (NSP is not "
      "trained); 109,512,762 parameters (docs/networks.md). AdamW lr 1e-4, wd 0.01, eps 1e-6."));
  v.push_back(
      make("gpt2", 2, 8, adamw_optimizer(2.5e-4f, 0.01f, 1e-8f), gpt2,
           "GPT-2 small (Radford et al.): 12 pre-LN decoder layers of 768, 12 heads, FFN 3072, "
           "tanh GELU, causal attention, vocab 50257, context 1024 (option seq shortens it), "
           "dropout 0.1, final LayerNorm, output layer tied to the token embeddings; 124,439,808 "
           "parameters as the published model. AdamW lr 2.5e-4, wd 0.01."));
  v.push_back(make("bert_tiny", 8, 8, adamw_optimizer(1e-3f, 0.01f, 1e-6f), bert_tiny,
                   "BERT as bert_base at test size: 2 layers of 64, 4 heads, FFN 256, vocab "
                   "1000, 64 positions, sequence 32 (173,480 parameters)."));
  v.push_back(make("gpt2_tiny", 8, 8, adamw_optimizer(1e-3f, 0.01f, 1e-8f), gpt2_tiny,
                   "GPT-2 as gpt2 at test size: 2 layers of 64, 4 heads, FFN 256, vocab 1000, "
                   "context 64, sequence 32 (168,192 parameters)."));
  return v;
}

}  // namespace
}  // namespace dlhost::networks_transformer

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::network_plugin<dlhost::networks_transformer::networks>(
      host, {"networks_transformer", "0.1.0",
             "Transformers beyond the paper: BERT-base (masked LM), GPT-2 small, and tiny "
             "variants of each for tests"});
}
