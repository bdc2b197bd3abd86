// schema.cpp — the key table (see schema.h). Changing a default here changes it everywhere.
#include "suite/schema.h"

#include <utility>

namespace dlhost {

using ordered_json = nlohmann::ordered_json;

const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> specs = [] {
    std::vector<KeySpec> s;
    auto name = [&s](const char* n, ordered_json def) {
      s.push_back({n, KeyKind::kName, false, 0, false, {}, std::move(def)});
    };
    auto integer = [&s](const char* n, bool has_min, int64_t min, bool exclusive,
                        ordered_json def) {
      s.push_back({n, KeyKind::kInt, has_min, min, exclusive, {}, std::move(def)});
    };
    auto number = [&s](const char* n, bool exclusive, ordered_json def) {
      s.push_back({n, KeyKind::kNumber, true, 0, exclusive, {}, std::move(def)});
    };
    auto boolean = [&s](const char* n, bool def) {
      s.push_back({n, KeyKind::kBool, false, 0, false, {}, def});
    };
    auto choice = [&s](const char* n, std::vector<std::string> choices) {
      ordered_json def = choices.front();
      s.push_back({n, KeyKind::kChoice, false, 0, false, std::move(choices), std::move(def)});
    };
    name("network", nullptr);
    name("backend", nullptr);  // unset: the highest-priority usable backend
    integer("batch", true, 0, true, nullptr);
    integer("threads", true, 0, false, 0);
    integer("iterations", true, 0, true, 20);
    integer("warmup", true, 0, false, 5);
    number("timeout", true, 600);
    // Multi-rank cases: how long the ranks may all wait for each other at start-up (a rank not
    // started, the comm's init) with none moving on before the case fails naming them. No
    // default in the table, so that cases that do not set it keep their params_hash: unset is
    // 60 s (case_process.cpp).
    number("startup_timeout", true, nullptr);
    integer("memory_limit_mb", true, 0, true, nullptr);
    integer("seed", false, 0, false, 42);
    integer("device", false, 0, false, nullptr);  // unset: the rank's local rank modulo devices
    name("comm", "none");
    integer("ranks", true, 0, true, 1);
    integer("ranks_per_node", true, 0, true, nullptr);
    choice("launcher", {"mpirun", "srun", "local"});
    choice("scaling", {"strong", "weak"});
    boolean("overlap", true);
    number("bucket_mb", true, 25);
    // Device gradients: `device` needs a comm on device memory (NCCL, a CUDA-aware MPI) and is
    // SKIPPED without one; `host` stages them through host memory; `auto` takes device where it
    // can.
    choice("comm_memory", {"auto", "device", "host"});
    number("lr", false, nullptr);
    number("momentum", false, nullptr);
    number("weight_decay", false, nullptr);
    number("clip_norm", false, nullptr);
    // The update (dlhost_backend.h): the network's default when unset; a backend whose
    // capabilities lack AdamW records the case SKIPPED. beta1, beta2, adam_epsilon are AdamW's.
    // No default in the table (unset keeps a case's params_hash): the network's optimizer.
    s.push_back({"optimizer", KeyKind::kChoice, false, 0, false, {"sgd", "adamw"}, nullptr});
    number("beta1", false, nullptr);
    number("beta2", false, nullptr);
    number("adam_epsilon", false, nullptr);
    // Arithmetic of the model (dlhost_device.h's dlhost_precision): a backend whose capabilities
    // lack the mode records the case SKIPPED. loss_scale is fp16's (0 or unset: dynamic).
    choice("precision", {"fp32", "tf32", "bf16", "fp16"});
    number("loss_scale", false, nullptr);
    // auto: a 1-rank case without comm lets a 1.4 backend do the whole step in one call (the
    // phase times are then not a breakdown); off: always the three separate phases. No default
    // in the table (unset keeps a case's params_hash): unset is auto (runner.cpp).
    s.push_back({"fused_step", KeyKind::kChoice, false, 0, false, {"auto", "off"}, nullptr});
    boolean("oversubscribe", false);
    choice("input", {"resident", "upload"});  // upload: the batch copied to the device each step
    // Real data (docs/data.md): `synthetic`, `real` (the directory in $DLHOST_DATA) or a
    // directory; epochs 0 runs warmup + iterations steps, more runs whole epochs of epoch_size
    // samples (0: the whole training split); evaluate scores the test split at the end.
    s.push_back({"data", KeyKind::kText, false, 0, false, {}, "synthetic"});
    integer("epochs", true, 0, false, 0);
    integer("epoch_size", true, 0, false, 0);
    boolean("evaluate", false);
    s.push_back({"options", KeyKind::kOptions, false, 0, false, {}, nullptr});
    s.push_back({"tags", KeyKind::kTags, false, 0, false, {}, nullptr});
    // Extra launcher arguments for multi-rank cases (a hostfile, MCA settings): a list.
    s.push_back({"launcher_args", KeyKind::kTags, false, 0, false, {}, nullptr});
    // The link between the ranks' hosts (docs/distributed.md): unset or loopback, every rank on
    // this host; otherwise each host a network namespace, its link shaped by tc. custom takes
    // link_gbit (bandwidth) and/or link_latency_us (one way, host to host). Without a default,
    // so cases that do not set it keep their parameters (and params_hash).
    s.push_back({"interconnect",
                 KeyKind::kChoice,
                 false,
                 0,
                 false,
                 {"loopback", "10gbe", "1gbe", "custom"},
                 nullptr});
    number("link_gbit", true, nullptr);
    number("link_latency_us", false, nullptr);
    return s;
  }();
  return specs;
}

const KeySpec* find_key_spec(const std::string& key) {
  for (const KeySpec& spec : key_specs()) {
    if (spec.name == key) return &spec;
  }
  return nullptr;
}

std::vector<std::string> case_key_names() {
  std::vector<std::string> names;
  for (const KeySpec& spec : key_specs()) names.push_back(spec.name);
  return names;
}

}  // namespace dlhost
