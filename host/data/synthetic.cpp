// synthetic.cpp — see synthetic.h. std::mt19937_64 with hand-written mappings (not the standard
// distributions, whose output may differ between standard libraries) keeps the numbers
// identical wherever dlhost is built.
#include "data/synthetic.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/graph.h"

namespace dlhost {

namespace {

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

double normal(std::mt19937_64& rng) {
  // Box-Muller; 1 - u keeps the log finite.
  double u1 = 1.0 - uniform01(rng), u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace

std::vector<float> initial_param(const Graph& graph, uint64_t seed, int32_t index) {
  const auto& p = graph.param(index);
  std::vector<float> values(static_cast<size_t>(p.count));
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(index));
  switch (p.init) {
    case DLHOST_INIT_ONE:
      std::fill(values.begin(), values.end(), 1.0f);
      break;
    case DLHOST_INIT_XAVIER_UNIFORM: {
      double a = std::sqrt(6.0 / static_cast<double>(p.fan_in + p.fan_out));
      for (auto& v : values) v = static_cast<float>((2.0 * uniform01(rng) - 1.0) * a);
      break;
    }
    case DLHOST_INIT_UNIFORM: {
      double a = 1.0 / std::sqrt(static_cast<double>(p.fan_in));
      for (auto& v : values) v = static_cast<float>((2.0 * uniform01(rng) - 1.0) * a);
      break;
    }
    case DLHOST_INIT_HE_NORMAL: {
      double sd = std::sqrt(2.0 / static_cast<double>(p.fan_in));
      for (auto& v : values) v = static_cast<float>(normal(rng) * sd);
      break;
    }
    default:
      std::fill(values.begin(), values.end(), 0.0f);
  }
  return values;
}

std::vector<std::vector<float>> initial_params(const Graph& graph, uint64_t seed) {
  std::vector<std::vector<float>> out;
  for (int32_t i = 0; i < graph.num_params(); ++i) out.push_back(initial_param(graph, seed, i));
  return out;
}

std::vector<InputData> synthetic_inputs(const Graph& graph, uint64_t seed, int64_t sample_offset) {
  const dlhost_graph* g = graph.view();
  std::vector<InputData> out;
  for (int32_t k = 0; k < g->num_inputs; ++k) {
    const auto& t = graph.tensor(g->inputs[k]);
    int64_t batch = t.dims[0], per_sample = 1;
    for (int32_t d = 1; d < t.rank; ++d) per_sample *= t.dims[d];
    InputData in;
    in.tensor = t.id;
    in.bytes.resize(static_cast<size_t>(batch * per_sample) * 4);
    // Ids range over what reads them: the classes of a loss (the logits' last dimension) or
    // the vocabulary of an embedding.
    int64_t classes = 1;
    for (int32_t n = 0; n < g->num_nodes; ++n) {
      const auto& node = *g->nodes[n];
      if (node.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY && node.inputs[1] == t.id) {
        const auto& logits = graph.tensor(node.inputs[0]);
        classes = logits.dims[logits.rank - 1];
      }
      if (node.op == DLHOST_OP_EMBEDDING && node.inputs[0] == t.id)
        classes = static_cast<const dlhost_embedding_attrs*>(node.attrs)->vocab;
    }
    for (int64_t i = 0; i < batch; ++i) {
      uint64_t sample = static_cast<uint64_t>(sample_offset + i);
      std::mt19937_64 rng(
          dlhost_mix64(dlhost_mix64(seed * 7919ULL + static_cast<uint64_t>(k)) ^ sample));
      unsigned char* dst = in.bytes.data() + static_cast<size_t>(i * per_sample) * 4;
      for (int64_t j = 0; j < per_sample; ++j) {
        if (t.dtype == DLHOST_DTYPE_I32) {
          int32_t label = static_cast<int32_t>(rng() % static_cast<uint64_t>(classes));
          std::memcpy(dst + j * 4, &label, 4);
        } else {
          float v = static_cast<float>(uniform01(rng));
          std::memcpy(dst + j * 4, &v, 4);
        }
      }
    }
    out.push_back(std::move(in));
  }
  return out;
}

}  // namespace dlhost
