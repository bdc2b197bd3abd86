// schema.cpp — the key table and the link profiles (see schema.h). Changing a default here
// changes it everywhere.
#include "suite/schema.h"

#include <utility>

#include "dlhost/plugin_kit.hpp"
#include "launch/launchers.h"

namespace dlhost {

using ordered_json = nlohmann::ordered_json;

namespace {

// A key without an unset value and not launch-only (the table sets those after adding it).
KeySpec key_spec(const char* name, KeyKind kind, bool has_min, int64_t min, bool min_exclusive,
                 std::vector<std::string> choices, ordered_json def) {
  KeySpec k;
  k.name = name;
  k.kind = kind;
  k.has_min = has_min;
  k.min = min;
  k.min_exclusive = min_exclusive;
  k.choices = std::move(choices);
  k.def = std::move(def);
  return k;
}

}  // namespace

// long-function: the table itself, one key (with its unset and launch-only lines) after the other
// in the documented order; split, the one list would be scattered.
const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> specs = [] {
    std::vector<KeySpec> s;
    auto name = [&s](const char* n, ordered_json def) {
      s.push_back(key_spec(n, KeyKind::kName, false, 0, false, {}, std::move(def)));
    };
    auto integer = [&s](const char* n, bool has_min, int64_t min, bool exclusive,
                        ordered_json def) {
      s.push_back(key_spec(n, KeyKind::kInt, has_min, min, exclusive, {}, std::move(def)));
    };
    auto number = [&s](const char* n, bool exclusive, ordered_json def) {
      s.push_back(key_spec(n, KeyKind::kNumber, true, 0, exclusive, {}, std::move(def)));
    };
    auto boolean = [&s](const char* n, bool def) {
      s.push_back(key_spec(n, KeyKind::kBool, false, 0, false, {}, def));
    };
    auto choice = [&s](const char* n, std::vector<std::string> choices) {
      ordered_json def = choices.front();
      s.push_back(
          key_spec(n, KeyKind::kChoice, false, 0, false, std::move(choices), std::move(def)));
    };
    // What absence means, for the key just added (it has no default, see KeySpec::unset).
    auto unset_is = [&s](ordered_json value, const char* means) {
      s.back().unset = std::move(value);
      s.back().unset_means = means;
    };
    auto launch_only = [&s] { s.back().launch_only = true; };
    name("network", nullptr);
    name("backend", nullptr);
    unset_is(nullptr, "the usable backend of highest priority here");
    integer("batch", true, 0, true, nullptr);
    unset_is(nullptr, "the network's paper batch, chosen by the host");
    integer("threads", true, 0, false, 0);
    // The backends refuse more (sdk::Options::get_int_in): the same bound, refused at load.
    s.back().max = sdk::kMaxThreads;
    integer("iterations", true, 0, true, 20);
    integer("warmup", true, 0, false, 5);
    number("timeout", true, 600);
    launch_only();
    // Multi-rank cases: how long the ranks may all wait for each other at start-up (a rank not
    // started, the comm's init) with none moving on before the case fails naming them. No
    // default in the table, so that cases that do not set it keep their params_hash.
    number("startup_timeout", true, nullptr);
    unset_is(60, "60 s");
    integer("memory_limit_mb", true, 0, true, nullptr);
    unset_is(0, "no limit");
    integer("seed", false, 0, false, 42);
    integer("device", false, 0, false, nullptr);
    unset_is(nullptr, "the rank's local rank modulo the backend's device count");
    name("comm", "none");
    launch_only();
    integer("ranks", true, 0, true, 1);
    launch_only();
    // Only the test hosts read the value (one rank per host); under mpirun or srun an unset key
    // adds no placement argument (case_process.cpp).
    integer("ranks_per_node", true, 0, true, nullptr);
    unset_is(1, "1 rank per test host; otherwise the launcher places the ranks");
    launch_only();
    choice("launcher", launcher_names());  // the registry's (launch/launchers.h), mpirun first
    launch_only();
    choice("scaling", {"strong", "weak"});
    boolean("overlap", true);
    launch_only();
    number("bucket_mb", true, 25);
    launch_only();
    // Device gradients: `device` needs a comm on device memory (NCCL, a CUDA-aware MPI) and is
    // SKIPPED without one; `host` stages them through host memory; `auto` takes device where it
    // can.
    choice("comm_memory", {"auto", "device", "host"});
    constexpr const char* kNetworks = "the network's default";
    number("lr", false, nullptr);
    unset_is(nullptr, kNetworks);
    number("momentum", false, nullptr);
    unset_is(nullptr, kNetworks);
    number("weight_decay", false, nullptr);
    unset_is(nullptr, kNetworks);
    number("clip_norm", false, nullptr);
    unset_is(nullptr, kNetworks);
    // The update (dlhost_backend.h): a backend whose capabilities lack AdamW records the case
    // SKIPPED. beta1, beta2, adam_epsilon are AdamW's. No default in the table (unset keeps a
    // case's params_hash): the network's optimizer.
    s.push_back(
        key_spec("optimizer", KeyKind::kChoice, false, 0, false, {"sgd", "adamw"}, nullptr));
    unset_is(nullptr, kNetworks);
    number("beta1", false, nullptr);
    unset_is(nullptr, kNetworks);
    number("beta2", false, nullptr);
    unset_is(nullptr, kNetworks);
    number("adam_epsilon", false, nullptr);
    unset_is(nullptr, kNetworks);
    // Arithmetic of the model (dlhost_device.h's dlhost_precision): a backend whose capabilities
    // lack the mode records the case SKIPPED. loss_scale is fp16's.
    choice("precision", {"fp32", "tf32", "bf16", "fp16"});
    number("loss_scale", false, nullptr);
    unset_is(0, "0, dynamic scaling");
    // auto: a 1-rank case without comm lets a 1.4 backend do the whole step in one call (the
    // phase times are then not a breakdown); off: always the three separate phases. No default
    // in the table (unset keeps a case's params_hash).
    s.push_back(
        key_spec("fused_step", KeyKind::kChoice, false, 0, false, {"auto", "off"}, nullptr));
    unset_is("auto", "auto");
    // > 0: after training, time one square FC forward of this size through the case's backend,
    // threads and precision (run/matmul_peak.h): the peak model FLOP utilisation divides by.
    // No default in the table (unset keeps a case's params_hash).
    integer("matmul_peak", true, 0, false, nullptr);
    unset_is(0, "0, not measured");
    // The process's runtime (run/runtime_settings.h): the malloc every backend of the case
    // runs on (preloaded into the case's process, and dlmopen'd first into a backend's own
    // link-map namespace), and the core OpenBLAS runs (`auto`: its own choice unless that falls
    // below this CPU's vector ISA, then the best core of the ISA; a name: OPENBLAS_CORETYPE).
    // No defaults in the table (unset keeps a case's params_hash).
    s.push_back(key_spec("allocator", KeyKind::kChoice, false, 0, false,
                         {"system", "tcmalloc", "jemalloc"}, nullptr));
    unset_is("auto", "tcmalloc where installed, else system");
    s.push_back(key_spec("openblas_coretype", KeyKind::kChoice, false, 0, false,
                         {"auto", "Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                          "Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake", "Barcelona",
                          "Bulldozer", "Piledriver", "Steamroller", "Excavator"},
                         nullptr));
    unset_is("auto", "auto");
    s.push_back(key_spec("omp_wait_policy", KeyKind::kChoice, false, 0, false,
                         {"passive", "active"}, nullptr));
    unset_is("inherit", "as dlhost's own environment has it");
    boolean("oversubscribe", false);
    launch_only();
    choice("input", {"resident", "upload"});  // upload: the batch copied to the device each step
    // Real data (docs/data.md): `synthetic`, `real` (the directory in $DLHOST_DATA) or a
    // directory; epochs 0 runs warmup + iterations steps, more runs whole epochs of epoch_size
    // samples (0: the whole training split); evaluate scores the test split at the end.
    s.push_back(key_spec("data", KeyKind::kText, false, 0, false, {}, "synthetic"));
    integer("epochs", true, 0, false, 0);
    integer("epoch_size", true, 0, false, 0);
    boolean("evaluate", false);
    s.push_back(key_spec("options", KeyKind::kOptions, false, 0, false, {}, nullptr));
    s.push_back(key_spec("tags", KeyKind::kTags, false, 0, false, {}, nullptr));
    launch_only();
    // Extra launcher arguments for multi-rank cases (a hostfile, MCA settings): a list.
    s.push_back(key_spec("launcher_args", KeyKind::kTags, false, 0, false, {}, nullptr));
    launch_only();
    // The link between the ranks' hosts (docs/distributed.md): unset or loopback, every rank on
    // this host; otherwise each host a network namespace, its link shaped by tc. custom takes
    // link_gbit (bandwidth) and/or link_latency_us (one way, host to host). Without a default,
    // so cases that do not set it keep their parameters (and params_hash).
    std::vector<std::string> links;
    for (const LinkProfile& l : link_profiles()) links.push_back(l.name);
    s.push_back(
        key_spec("interconnect", KeyKind::kChoice, false, 0, false, std::move(links), nullptr));
    unset_is("loopback", "loopback");
    launch_only();
    number("link_gbit", true, nullptr);
    unset_is(0, "unshaped");
    launch_only();
    number("link_latency_us", false, nullptr);
    unset_is(0, "none added");
    launch_only();
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

std::vector<std::string> launch_only_keys() {
  std::vector<std::string> names;
  for (const KeySpec& spec : key_specs())
    if (spec.launch_only) names.push_back(spec.name);
  return names;
}

}  // namespace dlhost
