// feed.cpp — see feed.h.
#include "data/feed.h"

#include <stdexcept>

namespace dlhost::data {

namespace {

// What reads tensor `id`: an embedding (its vocabulary) or a loss (the logits' last dimension,
// or 0 for a regression loss); -1 when neither does.
int64_t classes_read_by(const dlhost_graph& g, int32_t id, bool& by_embedding) {
  by_embedding = false;
  for (int32_t n = 0; n < g.num_nodes; ++n) {
    const dlhost_node& node = *g.nodes[n];
    for (int32_t k = 0; k < node.num_inputs; ++k) {
      if (node.inputs[k] != id) continue;
      if (node.op == DLHOST_OP_EMBEDDING) {
        by_embedding = true;
        return static_cast<const dlhost_embedding_attrs*>(node.attrs)->vocab;
      }
      if (node.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY && k == 1) {
        const dlhost_tensor_desc& logits = *g.tensors[node.inputs[0]];
        return logits.dims[logits.rank - 1];
      }
    }
  }
  return -1;
}

}  // namespace

FeedPlan::FeedPlan(const dlhost_graph& graph, const BatchLayout& layout, int64_t batch,
                   int64_t classes, const std::string& data_name) {
  const std::string network = graph.network ? graph.network : "?";
  auto refuse = [&](const dlhost_tensor_desc& t, const std::string& why) {
    throw std::invalid_argument("network " + network + ", input '" + t.name + "' and data " +
                                data_name + ": " + why);
  };
  for (int32_t i = 0; i < graph.num_inputs; ++i) {
    const dlhost_tensor_desc& t = *graph.tensors[graph.inputs[i]];
    if (t.rank < 1 || t.dims[0] != batch)
      refuse(t, "the graph's mini-batch is " + std::to_string(t.rank ? t.dims[0] : 0) +
                    ", the pipeline's " + std::to_string(batch));
    int64_t per_sample = 1;
    for (int32_t d = 1; d < t.rank; ++d) per_sample *= t.dims[d];
    bool by_embedding = false;
    const int64_t reader_classes = classes_read_by(graph, t.id, by_embedding);
    Part part = Part::features;
    int64_t have = layout.features_per_sample;
    if (t.dtype == DLHOST_DTYPE_I32) {
      part = by_embedding ? Part::ids : Part::targets;
      have = by_embedding ? layout.ids_per_sample : layout.targets_per_sample;
      if (reader_classes >= 0 && classes > reader_classes)
        refuse(t, "the data has " + std::to_string(classes) + " classes or words, the network " +
                      std::to_string(reader_classes));
    } else if (t.dtype != DLHOST_DTYPE_F32) {
      refuse(t, "only float32 and int32 inputs can be fed from data");
    }
    if (have != per_sample)
      refuse(t, "it takes " + std::to_string(per_sample) + " elements per sample, the data gives " +
                    std::to_string(have));
    inputs_.emplace_back(t.id, part);
  }
}

void FeedPlan::bind(const Batch& batch, std::vector<InputFeed>& out) const {
  out.clear();
  for (const auto& [tensor, part] : inputs_) {
    switch (part) {
      case Part::features:
        out.push_back({tensor, batch.features.data(), batch.features.bytes()});
        break;
      case Part::ids:
        out.push_back({tensor, batch.ids.data(), batch.ids.bytes()});
        break;
      case Part::targets:
        out.push_back({tensor, batch.targets.data(), batch.targets.bytes()});
        break;
    }
  }
}

}  // namespace dlhost::data
