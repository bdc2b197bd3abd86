// fuzz_graph.cpp — libFuzzer target: the graph builder driven by random build calls through
// the C builder table, as a hostile network plugin would make them. The contract: every bad call
// returns a status (never throws through the table, never crashes), out-parameters are untouched
// on error, and a graph that finishes has consistent shapes, parameter counts and FLOPs.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/graph.h"
#include "core/host_api.h"

namespace {

// Reads fuzz bytes as small numbers; past the end everything is 0.
struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t u8() { return n ? (--n, *p++) : 0; }
  int64_t small(int64_t lo, int64_t hi) {  // in [lo, hi]
    return lo + static_cast<int64_t>(u8()) % (hi - lo + 1);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  const dlhost_builder_api* api = dlhost::GraphBuilder::c_api();
  dlhost::GraphBuilder builder("fuzz", in.small(1, 4));
  dlhost_graph_builder* b = builder.c_handle();
  std::vector<int32_t> ids;
  auto pick = [&]() -> int32_t {
    // Mostly existing tensors, sometimes a wrong id.
    if (ids.empty() || in.u8() % 16 == 0) return static_cast<int32_t>(in.small(-2, 40));
    return ids[static_cast<size_t>(in.u8()) % ids.size()];
  };
  int steps = static_cast<int>(in.small(1, 24));
  for (int step = 0; step < steps; ++step) {
    std::string name = "n" + std::to_string(step % (1 + in.u8() % 8));  // duplicate names too
    int32_t out = -7777;
    dlhost_status* s = nullptr;
    switch (in.u8() % 14) {
      case 0: {
        int64_t dims[4] = {in.small(0, 9), in.small(1, 12), in.small(1, 12), in.small(1, 12)};
        s = api->input(b, name.c_str(), in.u8() % 3, static_cast<int32_t>(in.small(0, 3)), dims,
                       &out);
        break;
      }
      case 1: {
        dlhost_fc_attrs a{DLHOST_FC_ATTRS_STRUCT_SIZE, in.small(-1, 9), in.u8() % 2,
                          static_cast<int32_t>(in.small(0, 3))};
        s = api->fc(b, name.c_str(), pick(), &a, &out);
        break;
      }
      case 2: {
        dlhost_conv2d_attrs a{DLHOST_CONV2D_ATTRS_STRUCT_SIZE,
                              in.small(-1, 6),
                              in.small(0, 5),
                              in.small(0, 5),
                              in.small(0, 3),
                              in.small(0, 3),
                              in.small(-1, 3),
                              in.small(-1, 3),
                              in.small(0, 3),
                              in.small(0, 3),
                              in.small(0, 3),
                              in.u8() % 2};
        s = api->conv2d(b, name.c_str(), pick(), &a, &out);
        break;
      }
      case 3: {
        dlhost_pool2d_attrs a{DLHOST_POOL2D_ATTRS_STRUCT_SIZE,
                              static_cast<int32_t>(in.small(0, 3)),
                              in.small(0, 4),
                              in.small(0, 4),
                              in.small(0, 3),
                              in.small(0, 3),
                              in.small(-1, 3),
                              in.small(-1, 3),
                              in.u8() % 2,
                              in.u8() % 2};
        s = api->pool2d(b, name.c_str(), pick(), &a, &out);
        break;
      }
      case 4: {
        dlhost_activation_attrs a{DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE,
                                  static_cast<int32_t>(in.small(0, 4))};
        s = api->activation(b, name.c_str(), pick(), &a, &out);
        break;
      }
      case 5:
        s = api->softmax_cross_entropy(b, name.c_str(), pick(), pick(), &out);
        break;
      case 6:
        s = api->mse_loss(b, name.c_str(), pick(), pick(), &out);
        break;
      case 7: {
        dlhost_batch_norm_attrs a{DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE, in.u8() / 100.0f,
                                  in.u8() / 200.0f};
        s = api->batch_norm(b, name.c_str(), pick(), &a, &out);
        break;
      }
      case 8: {
        dlhost_dropout_attrs a{DLHOST_DROPOUT_ATTRS_STRUCT_SIZE, in.u8() / 200.0f};
        s = api->dropout(b, name.c_str(), pick(), &a, &out);
        break;
      }
      case 9:
        s = api->add(b, name.c_str(), pick(), pick(), &out);
        break;
      case 10: {
        dlhost_lrn_attrs a{DLHOST_LRN_ATTRS_STRUCT_SIZE, in.small(-1, 7), in.u8() / 100.0f,
                           in.u8() / 100.0f, in.u8() / 50.0f};
        s = api->lrn(b, name.c_str(), pick(), &a, &out);
        break;
      }
      case 11: {
        dlhost_embedding_attrs a{DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE, in.small(-1, 20),
                                 in.small(-1, 8)};
        s = api->embedding(b, name.c_str(), pick(), &a, &out);
        break;
      }
      case 12: {
        dlhost_lstm_attrs a{DLHOST_LSTM_ATTRS_STRUCT_SIZE, in.small(-1, 6), in.small(-1, 3)};
        s = api->lstm(b, name.c_str(), pick(), &a, &out);
        break;
      }
      default:
        s = api->global_avg_pool(b, name.c_str(), pick(), &out);
        break;
    }
    if (s != nullptr) {
      if (out != -7777) __builtin_trap();        // out-parameters untouched on error
      if (s->message.empty()) __builtin_trap();  // every error says what is wrong
      dlhost::host_api()->status_destroy(s);
    } else {
      ids.push_back(out);
    }
  }
  try {
    auto graph = builder.finish();
    const dlhost_graph* v = graph->view();
    int64_t counted = 0;
    for (int32_t i = 0; i < v->num_params; ++i) {
      int64_t n = 1;
      for (int32_t d = 0; d < v->params[i]->rank; ++d) n *= v->params[i]->dims[d];
      if (n != v->params[i]->count || n <= 0) __builtin_trap();
      counted += n;
    }
    if (counted != graph->param_count()) __builtin_trap();
    if (!(graph->forward_flops() >= 0) || !std::isfinite(graph->forward_flops())) __builtin_trap();
    if (v->loss < 0 || v->tensors[v->loss]->rank != 0) __builtin_trap();
    for (int32_t t = 0; t < v->num_tensors; ++t)
      for (int32_t d = 0; d < v->tensors[t]->rank; ++d)
        if (v->tensors[t]->dims[d] <= 0) __builtin_trap();
  } catch (const dlhost::Error&) {
  }
  return 0;
}
