// list_commands.cpp — `dlhost plugins` and `dlhost networks`: what this machine has, as a table
// or as JSON. Both are views: the JSON is built first and the table printed from it.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/compatibility.h"
#include "core/graph.h"
#include "core/host_api.h"
#include "core/plugin_registry.h"

namespace dlhost {

using json = nlohmann::ordered_json;

namespace {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// --- dlhost plugins --------------------------------------------------------------------------

// The options a plugin declares (ABI 1.2), or null when it declares none (then its options are
// passed unchecked).
json options_json(const LoadedPlugin& p) {
  if (p.extensions.option_schema == nullptr) return nullptr;
  json out = json::array();
  for (const OptionDecl& o : p.options) {
    json j{{"name", o.name}, {"type", option_type_name(o.type)}, {"help", o.help}};
    j["default"] = o.default_value ? json(*o.default_value) : json(nullptr);
    if (!o.choices.empty()) j["choices"] = o.choices;
    out.push_back(j);
  }
  return out;
}

json caps_json(const LoadedPlugin& p) {
  BackendCaps caps = backend_caps(p);
  json ops = json::array();
  for (int32_t op : caps.ops) ops.push_back(sdk::op_name(op));
  return json{{"published", caps.published},
              {"precisions", caps_precisions_text(caps)},
              {"asynchronous", caps.asynchronous},
              {"ops", ops}};
}

void print_details(const json& j) {
  if (j.contains("capabilities")) {
    const json& c = j["capabilities"];
    std::string ops;
    for (const auto& op : c["ops"]) ops += (ops.empty() ? "" : ", ") + op.get<std::string>();
    std::printf("    precision: %s%s; %zu ops%s\n", c["precisions"].get<std::string>().c_str(),
                c["published"].get<bool>() ? "" : " (assumed: no capabilities published)",
                c["ops"].size(), c["asynchronous"].get<bool>() ? "; asynchronous" : "");
    std::printf("    ops: %s\n", ops.empty() ? "none" : ops.c_str());
  }
  if (!j.contains("options")) return;
  if (j["options"].is_null()) {
    std::printf("    options: not declared (passed unchecked)\n");
    return;
  }
  if (j["options"].empty()) std::printf("    options: none of its own\n");
  for (const auto& o : j["options"]) {
    std::string type = o["type"].get<std::string>();
    if (o.contains("choices"))
      for (size_t i = 0; i < o["choices"].size(); ++i)
        type += (i ? "|" : " ") + o["choices"][i].get<std::string>();
    std::printf("    option %s (%s, default %s): %s\n", o["name"].get<std::string>().c_str(),
                type.c_str(), o["default"].is_null() ? "none" : o["default"].dump().c_str(),
                o["help"].get<std::string>().c_str());
  }
}

// One plugin as `dlhost plugins --json` shows it: with its devices (a backend), its library (a
// comm) or its number of networks.
json plugin_json(const LoadedPlugin& p, bool verbose) {
  json j{{"name", p.name},
         {"kind", kind_name(p.kind)},
         {"version", p.version},
         {"abi", std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor)},
         {"path", p.path},
         {"usable", p.usable}};
  if (!p.usable) j["unusable_reason"] = p.unusable_reason;
  if (!p.build.empty()) j["build"] = p.build;
  if (p.kind == DLHOST_PLUGIN_BACKEND && p.usable) {
    json devices = json::array();
    const auto* api = p.table->backend;
    for (int32_t d = 0; d < api->device_count(); ++d) {
      const dlhost_device_info* info = nullptr;
      StatusPtr failed(api->device_info(d, &info));
      if (failed || info == nullptr) continue;
      devices.push_back(json{{"name", info->name ? info->name : ""},
                             {"model", info->model ? info->model : ""},
                             {"cores", info->cores},
                             {"isa", info->isa ? info->isa : ""},
                             {"memory_bytes", info->memory_bytes},
                             {"library", info->library ? info->library : ""}});
    }
    j["devices"] = devices;
  }
  if (p.kind == DLHOST_PLUGIN_NETWORK) j["networks"] = p.table->network->count();
  if (verbose) {
    j["options"] = options_json(p);
    if (p.kind == DLHOST_PLUGIN_BACKEND) j["capabilities"] = caps_json(p);
  }
  if (p.kind == DLHOST_PLUGIN_COMM && p.usable) {
    dlhost_comm_caps caps{};
    caps.struct_size = DLHOST_COMM_CAPS_STRUCT_SIZE;
    StatusPtr failed(p.table->comm->capabilities(&caps));
    if (!failed)
      j["comm"] = json{{"library", caps.library ? caps.library : ""},
                       {"host_memory", caps.host_memory != 0},
                       {"device_memory", caps.device_memory != 0}};
  }
  return j;
}

void print_plugins(const json& out, const json& refused, const json& left_out,
                   const std::vector<std::string>& folders) {
  std::printf("%-16s %-8s %-8s %-4s %s\n", "NAME", "KIND", "VERSION", "ABI", "PATH");
  for (const auto& j : out) {
    std::printf("%-16s %-8s %-8s %-4s %s\n", j["name"].get<std::string>().c_str(),
                j["kind"].get<std::string>().c_str(), j["version"].get<std::string>().c_str(),
                j["abi"].get<std::string>().c_str(), j["path"].get<std::string>().c_str());
    if (!j["usable"].get<bool>())
      std::printf("    not usable here: %s\n", j["unusable_reason"].get<std::string>().c_str());
    if (j.contains("build") &&
        j["build"].get<std::string>().find("optimized=0") != std::string::npos)
      std::printf("    built without optimisation (%s): rebuild with -DCMAKE_BUILD_TYPE=Release\n",
                  j["build"].get<std::string>().c_str());
    if (j.contains("devices"))
      for (const auto& d : j["devices"])
        std::printf("    device %s: %s, %d cores, ISA %s, %s memory, %s\n",
                    d["name"].get<std::string>().c_str(), d["model"].get<std::string>().c_str(),
                    d["cores"].get<int>(), d["isa"].get<std::string>().c_str(),
                    human_bytes(d["memory_bytes"].get<double>()).c_str(),
                    d["library"].get<std::string>().c_str());
    if (j.contains("comm"))
      std::printf("    %s; memory: %s%s\n", j["comm"]["library"].get<std::string>().c_str(),
                  j["comm"]["host_memory"].get<bool>() ? "host" : "",
                  j["comm"]["device_memory"].get<bool>() ? " device" : "");
    if (j.contains("networks"))
      std::printf("    %d networks (see `dlhost networks`)\n", j["networks"].get<int>());
    print_details(j);
  }
  if (out.empty()) std::printf("(no plugins found)\n");
  for (const auto& r : refused)
    std::printf("refused %s\n    %s\n", r["path"].get<std::string>().c_str(),
                r["reason"].get<std::string>().c_str());
  for (const auto& l : left_out)
    std::printf("not built %s\n    %s\n", l["name"].get<std::string>().c_str(),
                l["reason"].get<std::string>().c_str());
  std::printf("searched: ");
  for (size_t i = 0; i < folders.size(); ++i) std::printf("%s%s", i ? ":" : "", folders[i].c_str());
  std::printf("\n");
}

}  // namespace

int cmd_plugins(const PluginRegistry& registry, bool as_json, bool verbose,
                const std::vector<std::string>& folders) {
  registry.probe_all();  // listing is what query() is for
  json out = json::array();
  for (const auto& p : registry.plugins()) out.push_back(plugin_json(p, verbose));
  json refused = json::array();
  for (const auto& r : registry.refused())
    refused.push_back(json{{"path", r.path}, {"reason", r.reason}});
  json left_out = json::array();
  for (const auto& l : registry.left_out())
    left_out.push_back(json{{"name", l.name}, {"path", l.path}, {"reason", l.reason}});
  if (as_json) {
    std::cout << json{{"plugins", out}, {"refused", refused}, {"left_out", left_out}}.dump(2)
              << "\n";
  } else {
    print_plugins(out, refused, left_out, folders);
  }
  return 0;
}

// --- dlhost networks -------------------------------------------------------------------------

int cmd_networks(const std::vector<NetworkRef>& networks, bool as_json, bool describe) {
  json out = json::array();
  for (const auto& n : networks) {
    json j{{"name", n.name},
           {"plugin", n.plugin->name},
           {"dataset", n.info->dataset ? n.info->dataset : ""}};
    try {
      // Shapes and counts come from the graph itself, built at mini-batch 1.
      dlhost_options none;
      auto graph = build_network(*n.plugin, n.index, 1, &none);
      j["input_shape"] = graph->input_shape();
      j["params"] = graph->param_count();
      j["forward_flops_per_sample"] = graph->forward_flops_per_sample();
      j["layers"] = graph->view()->num_nodes;
    } catch (const std::exception& e) {
      j["error"] = e.what();
    }
    j["cpu_batch"] = n.info->cpu_batch;
    j["gpu_batch"] = n.info->gpu_batch;
    const auto* o = n.info->optimizer;
    const dlhost_optimizer_desc whole = sdk::whole_optimizer(*o);
    j["optimizer"] = json{{"kind", optimizer_name(whole.kind)},
                          {"lr", o->learning_rate},
                          {"momentum", o->momentum},
                          {"weight_decay", o->weight_decay},
                          {"clip_norm", o->clip_norm}};
    // AdamW's own settings, so that bench/'s peers train with the same optimizer (issue 33).
    if (whole.kind == DLHOST_OPTIMIZER_ADAMW) {
      j["optimizer"]["beta1"] = whole.beta1;
      j["optimizer"]["beta2"] = whole.beta2;
      j["optimizer"]["epsilon"] = whole.epsilon;
    }
    j["description"] = n.info->description ? n.info->description : "";
    out.push_back(j);
  }
  if (as_json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("%-12s %-12s %14s %14s %9s %9s  %s\n", "NETWORK", "INPUT", "PARAMS", "FWD GFLOP/SMP",
              "CPU BATCH", "GPU BATCH", "OPTIMIZER");
  int errors = 0;
  for (const auto& j : out) {
    if (j.contains("error")) {
      std::printf("%-12s cannot be built: %s\n", j["name"].get<std::string>().c_str(),
                  j["error"].get<std::string>().c_str());
      ++errors;
      continue;
    }
    const auto& o = j["optimizer"];
    char opt[96];
    if (o["kind"] == "adamw")
      std::snprintf(opt, sizeof(opt), "AdamW lr %g wd %g%s", o["lr"].get<double>(),
                    o["weight_decay"].get<double>(),
                    o["clip_norm"].get<double>() > 0 ? " clip" : "");
    else
      std::snprintf(opt, sizeof(opt), "SGD lr %g momentum %g wd %g%s", o["lr"].get<double>(),
                    o["momentum"].get<double>(), o["weight_decay"].get<double>(),
                    o["clip_norm"].get<double>() > 0 ? " clip" : "");
    if (o["clip_norm"].get<double>() > 0)
      std::snprintf(opt + std::strlen(opt), sizeof(opt) - std::strlen(opt), " %g",
                    o["clip_norm"].get<double>());
    std::printf("%-12s %-12s %14s %14.4f %9lld %9lld  %s\n", j["name"].get<std::string>().c_str(),
                j["input_shape"].get<std::string>().c_str(),
                with_commas(j["params"].get<int64_t>()).c_str(),
                j["forward_flops_per_sample"].get<double>() / 1e9,
                static_cast<long long>(j["cpu_batch"].get<int64_t>()),
                static_cast<long long>(j["gpu_batch"].get<int64_t>()), opt);
    if (describe) std::printf("    %s\n", j["description"].get<std::string>().c_str());
  }
  return errors ? 1 : 0;
}

Command add_plugins_command(CLI::App& app, const std::vector<std::string>& folders) {
  struct Flags {
    bool json = false, verbose = false;
  };
  auto f = std::make_shared<Flags>();
  Command c;
  c.sub = app.add_subcommand(
      "plugins", "List the plugins found, their devices, and the files refused (with why)");
  c.sub->add_flag("--json", f->json, "Print JSON");
  c.sub->add_flag("-v,--verbose", f->verbose,
                  "Also list each plugin's options and each backend's capabilities");
  c.run = [f, &folders](const PluginRegistry& registry, const std::vector<NetworkRef>&) {
    return cmd_plugins(registry, f->json, f->verbose, folders);
  };
  return c;
}

Command add_networks_command(CLI::App& app) {
  struct Flags {
    bool json = false, describe = false;
  };
  auto f = std::make_shared<Flags>();
  Command c;
  c.sub = app.add_subcommand(
      "networks", "List the networks: input shape, parameters, forward FLOPs per sample");
  c.sub->add_flag("--json", f->json, "Print JSON");
  c.sub->add_flag("-d,--describe", f->describe, "Print each network's description");
  c.run = [f](const PluginRegistry&, const std::vector<NetworkRef>& networks) {
    return cmd_networks(networks, f->json, f->describe);
  };
  return c;
}

}  // namespace dlhost
