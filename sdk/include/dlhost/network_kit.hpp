// network_kit.hpp — write a network plugin as its graph builders; the kit fills
// dlhost_network_api (count, info, build), the plugin table and the entry's work.
//
// The author lists the networks once, each with its name, dataset, the paper's batch sizes, its
// optimizer and a builder function:
//   std::vector<sdk::Network> networks() {
//     return {{"mlp", "MNIST", 64, 256, sdk::sgd_optimizer(0.01f, 0.9f), build_mlp, "784-256-10"}};
//   }
//   extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* h) {
//     return dlhost::sdk::network_plugin<networks>(h, {"my_networks", "1.0.0", "what they are"});
//   }
// The kit checks the index (OUT_OF_RANGE), the builder table (older than ABI 1.0 is refused),
// hands the builder the case's options as sdk::Options, and turns every exception into a host
// status (sdk::Error keeps its code), as the backend kit does.
//
// Ownership: the list is made once, on first use, and lives as long as the library; the
// dlhost_network_info each network publishes points into it. Thread-safety: the list is built
// under a once-guard; builders must keep no mutable state (dlhost_network.h).
#ifndef DLHOST_NETWORK_KIT_HPP
#define DLHOST_NETWORK_KIT_HPP

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "dlhost/builder.hpp"
#include "dlhost/dlhost_network.h"
#include "dlhost/plugin_kit.hpp"

namespace dlhost::sdk {

// SGD as dlhost_backend.h defines it (clip_norm 0 = no clipping).
inline dlhost_optimizer_desc sgd_optimizer(float learning_rate, float momentum = 0.0f,
                                           float weight_decay = 0.0f, float clip_norm = 0.0f) {
  auto o = make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  o.kind = DLHOST_OPTIMIZER_SGD;
  o.learning_rate = learning_rate;
  o.momentum = momentum;
  o.weight_decay = weight_decay;
  o.clip_norm = clip_norm;
  return o;
}

// AdamW with decoupled weight decay (ABI 1.4; PyTorch's betas by default).
inline dlhost_optimizer_desc adamw_optimizer(float learning_rate, float weight_decay, float epsilon,
                                             float beta1 = 0.9f, float beta2 = 0.999f) {
  auto o = make_struct<dlhost_optimizer_desc>(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  o.kind = DLHOST_OPTIMIZER_ADAMW;
  o.learning_rate = learning_rate;
  o.weight_decay = weight_decay;
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.epsilon = epsilon;
  return o;
}

// One network of a plugin. Strings must live as long as the library (literals do).
struct Network {
  const char* name;     // what suites use: lower case, "fcn5"
  const char* dataset;  // what its synthetic data imitates: "MNIST"
  int64_t cpu_batch;    // the paper's CPU mini-batch
  int64_t gpu_batch;    // the paper's single-GPU mini-batch
  dlhost_optimizer_desc optimizer;
  // Describes the layers; throws sdk::Error on a bad option (the case is then refused).
  std::function<void(Builder&, const Options&)> build;
  const char* description;  // one paragraph: layers, where the definition comes from
};

namespace detail {

// The C table over the list `List()` returns: one static function per entry, each a guard.
template <std::vector<Network> (*List)()>
struct NetworkTable {
  struct Slot {
    Network network;
    dlhost_network_info info;
  };
  static const std::vector<Slot>& slots() {
    static std::vector<Slot> made;
    static std::once_flag once;
    std::call_once(once, [] {
      for (Network& n : List()) made.push_back({std::move(n), {}});
      for (Slot& s : made) {  // after the last push_back: the optimizer's address stays put
        s.info = make_struct<dlhost_network_info>(DLHOST_NETWORK_INFO_STRUCT_SIZE);
        s.info.name = s.network.name;
        s.info.description = s.network.description;
        s.info.dataset = s.network.dataset;
        s.info.cpu_batch = s.network.cpu_batch;
        s.info.gpu_batch = s.network.gpu_batch;
        s.info.optimizer = &s.network.optimizer;
      }
    });
    return made;
  }
  static const Slot& at(int32_t index, const char* call) {
    const auto& all = slots();
    if (index < 0 || static_cast<size_t>(index) >= all.size())
      fail(DLHOST_CODE_OUT_OF_RANGE, std::string(plugin_name()) + ": " + call + ": no network " +
                                         std::to_string(index) + " (" + std::to_string(all.size()) +
                                         " network(s))");
    return all[static_cast<size_t>(index)];
  }
  static int32_t count() {
    // count() cannot report an error: a list that throws is reported by info/build instead.
    try {
      return static_cast<int32_t>(slots().size());
    } catch (...) {
      return 0;
    }
  }
  static dlhost_status* info(int32_t index, const dlhost_network_info** out) {
    return guard([&] {
      const Slot& s = at(index, "info");
      deref(out, "info", "out");
      *out = &s.info;
    });
  }
  static dlhost_status* build(int32_t index, const dlhost_builder_api* api,
                              dlhost_graph_builder* builder, const dlhost_options* options) {
    return guard([&] {
      const Slot& s = at(index, "build");
      if (api == nullptr || api->struct_size < DLHOST_BUILDER_API_STRUCT_SIZE_1_0)
        invalid(std::string(plugin_name()) +
                ": build: builder table missing or older than ABI 1.0");
      Builder b(api, builder);
      s.network.build(b, Options(options));
    });
  }
  static const dlhost_network_api& table() {
    static const dlhost_network_api t = [] {
      auto a = make_struct<dlhost_network_api>(DLHOST_NETWORK_API_STRUCT_SIZE);
      a.count = count;
      a.info = info;
      a.build = build;
      return a;
    }();
    return t;
  }
};

}  // namespace detail

// The whole body of a network plugin's entry symbol (see the top of this file). The list is
// made on first use, not here, so that loading the plugin stays cheap.
template <std::vector<Network> (*List)()>
const dlhost_plugin* network_plugin(const dlhost_host_api* host, const PluginInfo& info) {
  using Table = detail::NetworkTable<List>;
  return detail::enter(
      host, info, nullptr, [] {},
      [](dlhost_plugin& p) {
        p.kind = DLHOST_PLUGIN_NETWORK;
        p.network = &Table::table();
      });
}

}  // namespace dlhost::sdk

#endif  // DLHOST_NETWORK_KIT_HPP
