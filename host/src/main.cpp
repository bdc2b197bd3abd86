// main.cpp — the dlhost command line: `plugins`, `networks`, `validate` and `run`.
//
// Reads top to bottom: global flags and logging, plugin discovery, then one function per
// subcommand. Results are data (results.h); what is printed here is a view of them.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "case_process.h"
#include "command.h"
#include "environment.h"
#include "graph.h"
#include "host_api.h"
#include "networks.h"
#include "plugin_registry.h"
#include "report/commands.h"
#include "results.h"
#include "runner.h"
#include "suite.h"

namespace {

using json = nlohmann::ordered_json;
using namespace dlhost;

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

int cmd_plugins(const PluginRegistry& registry, bool as_json) {
  json out = json::array();
  for (const auto& p : registry.plugins()) {
    json j{{"name", p.name},
           {"kind", kind_name(p.kind)},
           {"version", p.version},
           {"abi", std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor)},
           {"path", p.path},
           {"usable", p.usable}};
    if (!p.usable) j["unusable_reason"] = p.unusable_reason;
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
    if (p.kind == DLHOST_PLUGIN_COMM && p.usable) {
      dlhost_comm_caps caps{};
      caps.struct_size = DLHOST_COMM_CAPS_STRUCT_SIZE;
      StatusPtr failed(p.table->comm->capabilities(&caps));
      if (!failed)
        j["comm"] = json{{"library", caps.library ? caps.library : ""},
                         {"host_memory", caps.host_memory != 0},
                         {"device_memory", caps.device_memory != 0}};
    }
    out.push_back(j);
  }
  json refused = json::array();
  for (const auto& r : registry.refused())
    refused.push_back(json{{"path", r.path}, {"reason", r.reason}});

  if (as_json) {
    std::cout << json{{"plugins", out}, {"refused", refused}}.dump(2) << "\n";
    return 0;
  }
  std::printf("%-16s %-8s %-8s %-4s %s\n", "NAME", "KIND", "VERSION", "ABI", "PATH");
  for (const auto& j : out) {
    std::printf("%-16s %-8s %-8s %-4s %s\n", j["name"].get<std::string>().c_str(),
                j["kind"].get<std::string>().c_str(), j["version"].get<std::string>().c_str(),
                j["abi"].get<std::string>().c_str(), j["path"].get<std::string>().c_str());
    if (!j["usable"].get<bool>())
      std::printf("    not usable here: %s\n", j["unusable_reason"].get<std::string>().c_str());
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
  }
  if (out.empty()) std::printf("(no plugins found)\n");
  for (const auto& r : refused)
    std::printf("refused %s\n    %s\n", r["path"].get<std::string>().c_str(),
                r["reason"].get<std::string>().c_str());
  std::printf("searched: ");
  auto folders = PluginRegistry::default_search_path();
  for (size_t i = 0; i < folders.size(); ++i) std::printf("%s%s", i ? ":" : "", folders[i].c_str());
  std::printf("\n");
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
    j["optimizer"] = json{{"lr", o->learning_rate},
                          {"momentum", o->momentum},
                          {"weight_decay", o->weight_decay},
                          {"clip_norm", o->clip_norm}};
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

// --- dlhost validate / run -------------------------------------------------------------------

SuiteCatalog make_catalog(const PluginRegistry& registry, const std::vector<NetworkRef>& networks) {
  SuiteCatalog c;
  for (const auto& n : networks) c.networks.push_back(n.name);
  c.backends = registry.names(DLHOST_PLUGIN_BACKEND);
  c.comms = registry.names(DLHOST_PLUGIN_COMM);
  return c;
}

std::string default_results_path(const std::string& suite_name) {
  std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&t));
  return "results/" + suite_name + "-" + stamp + ".jsonl";
}

std::string case_line(size_t index, size_t total, const json& rec) {
  char head[256];
  std::snprintf(head, sizeof(head), "[%*zu/%zu] %-40s %-8s",
                static_cast<int>(std::to_string(total).size()), index, total,
                rec["case_id"].get<std::string>().c_str(),
                rec["status"].get<std::string>().c_str());
  std::string line = head;
  if (rec.contains("timing")) {
    const auto& t = rec["timing"];
    const auto& s = t["step"];
    char body[256];
    std::snprintf(body, sizeof(body),
                  " median %9.2f ms/mini-batch (p5 %.2f, p95 %.2f, n=%lld)  %10.1f samples/s",
                  s["median"].get<double>(), s["p5"].get<double>(), s["p95"].get<double>(),
                  static_cast<long long>(t["iterations"].get<int64_t>()),
                  t["samples_per_second"].get<double>());
    line += body;
  }
  if (!rec["reason"].get<std::string>().empty()) line += "  " + rec["reason"].get<std::string>();
  return line;
}

struct RunOptions {
  std::string suite;
  std::vector<std::string> cases, overrides;
  std::string output, resume;
  bool dry_run = false;
  bool in_process = false;                  // --no-isolate: debugging only
  std::vector<std::string> plugin_folders;  // what the case workers search
  std::vector<std::string> launcher_args;   // added to every multi-rank case's launcher
};

// Set by SIGINT/SIGTERM: the running case is ended, the loop stops, the results stay valid.
volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

// The 1-rank case a multi-rank case is compared with: the same parameters but for how the ranks
// are launched and communicate.
std::string scaling_key(const json& params) {
  json p = params;
  for (const char* k : {"ranks", "comm", "launcher", "launcher_args", "ranks_per_node", "overlap",
                        "bucket_mb", "tags", "oversubscribe", "timeout"})
    p.erase(k);
  return p.dump();
}

// Speedup and efficiency of a data-parallel record against its 1-rank record: strong scaling
// compares time per global mini-batch (speedup T1/TN); weak scaling compares throughput
// (N x T1/TN). Efficiency is speedup / N.
void add_scaling(json& rec, const json& baseline) {
  double t1 = baseline["timing"]["step"]["median"].get<double>();
  double tn = rec["timing"]["step"]["median"].get<double>();
  int n = rec["distributed"]["ranks"].get<int>();
  bool weak = rec["distributed"]["scaling"] == "weak";
  double speedup = tn > 0 ? (weak ? n * t1 / tn : t1 / tn) : 0.0;
  rec["distributed"]["vs_1_rank"] = json{
      {"baseline_case", baseline["case_id"]}, {"speedup", speedup}, {"efficiency", speedup / n}};
}

// Identifies a case's parameters for --resume: a changed case runs again.
std::string params_hash(const json& params) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : params.dump()) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

int cmd_run(const PluginRegistry& registry, const std::vector<NetworkRef>& networks,
            const RunOptions& o, bool validate_only) {
  Suite suite;
  try {
    suite = load_suite(o.suite, make_catalog(registry, networks), host_cores(), o.overrides);
  } catch (const SuiteError& e) {
    std::fprintf(stderr, "dlhost: %s\n", e.what());
    return 2;
  }
  std::vector<const CaseSpec*> selected;
  for (const auto& c : suite.cases) {
    if (o.cases.empty()) {
      selected.push_back(&c);
      continue;
    }
    for (const auto& id : o.cases)
      if (c.id == id) selected.push_back(&c);
  }
  for (const auto& id : o.cases) {
    bool found = false;
    for (const auto* c : selected) found = found || c->id == id;
    if (!found) {
      std::fprintf(stderr, "dlhost: %s has no case '%s'; its cases are:\n", o.suite.c_str(),
                   id.c_str());
      for (const auto& c : suite.cases) std::fprintf(stderr, "  %s\n", c.id.c_str());
      return 2;
    }
  }
  // A multi-rank case needs ranks x threads cores: on one machine without them it is laid out
  // for a cluster and skipped, unless the suite says to oversubscribe or names other hosts.
  bool other_hosts = std::getenv("SLURM_JOB_ID") != nullptr || !o.launcher_args.empty();
  for (auto& c : suite.cases) {
    int64_t ranks = c.params.value("ranks", int64_t{1});
    int64_t need = ranks * std::max<int64_t>(c.params.value("threads", int64_t{0}), 1);
    if (ranks > 1 && c.skip_reason.empty() && need > host_cores() && !other_hosts &&
        !c.params.value("oversubscribe", false) && !c.params.contains("launcher_args"))
      c.skip_reason = "needs " + std::to_string(need) + " cores (" + std::to_string(ranks) +
                      " ranks x " + std::to_string(need / ranks) + " threads); this machine has " +
                      std::to_string(host_cores()) + " (run it under Slurm or with a hostfile)";
  }
  if (validate_only) {
    std::printf("%s: valid, %zu cases (%zu skipped here)\n", o.suite.c_str(), suite.cases.size(),
                static_cast<size_t>(
                    std::count_if(suite.cases.begin(), suite.cases.end(),
                                  [](const CaseSpec& c) { return !c.skip_reason.empty(); })));
    return 0;
  }
  if (o.dry_run) {
    for (const auto* c : selected) {
      std::printf("%s\n    %s\n", c->id.c_str(), c->params.dump().c_str());
      if (!c->skip_reason.empty()) std::printf("    SKIPPED: %s\n", c->skip_reason.c_str());
    }
    std::printf("%zu cases\n", selected.size());
    return 0;
  }

  // --resume FILE: append to FILE, running only the cases without a record of the same params.
  std::string out_path = !o.resume.empty()  ? o.resume
                         : o.output.empty() ? default_results_path(suite.name)
                                            : o.output;
  if (!o.resume.empty()) {
    std::set<std::pair<std::string, std::string>> done;
    try {
      ResultsFile previous = read_results(o.resume);
      for (const auto& r : previous.records)
        if (r.contains("case_id") && r.contains("params_hash"))
          done.insert({r["case_id"].get<std::string>(), r["params_hash"].get<std::string>()});
      if (previous.torn_lines > 0)
        std::printf("%s: ignoring %d torn line(s) left by an interrupted run\n", o.resume.c_str(),
                    previous.torn_lines);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlhost: --resume: %s\n", e.what());
      return 2;
    }
    size_t before = selected.size();
    selected.erase(std::remove_if(selected.begin(), selected.end(),
                                  [&](const CaseSpec* c) {
                                    return done.count({c->id, params_hash(c->params)}) != 0;
                                  }),
                   selected.end());
    std::printf("resuming %s: %zu of %zu cases already recorded\n", o.resume.c_str(),
                before - selected.size(), before);
  }
  std::unique_ptr<ResultsWriter> writer;
  try {
    writer = std::make_unique<ResultsWriter>(out_path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlhost: %s\n", e.what());
    return 2;
  }
  RunContext ctx;
  ctx.registry = &registry;
  ctx.networks = &networks;
  ctx.environment = capture_environment(registry);
  ctx.suite_name = suite.name;
  ctx.suite_path = suite.path;
  std::printf("dlhost %s (%s): suite %s, %zu cases, results -> %s\n", dlhost_version().c_str(),
              dlhost_git_revision().c_str(), suite.name.c_str(), selected.size(), out_path.c_str());
  std::fflush(stdout);

  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::map<std::string, int> counts;
  std::map<std::string, json> one_rank;  // scaling key -> the OK 1-rank record
  size_t index = 0;
  for (const auto* c : selected) {
    if (g_interrupted) break;
    CaseInput in{c->id, c->params, c->source, c->skip_reason};
    json rec;
    if (o.in_process || !c->skip_reason.empty()) {
      rec = run_case(in, ctx);
    } else {
      CaseJob job{in, suite.name, suite.path, o.plugin_folders};
      CaseLimits limits;
      double timeout = c->params.value("timeout", 600.0);
      // The case stops itself at its timeout (keeping its steps); the kill is the backstop.
      limits.timeout_s = timeout * 1.1 + 5.0;
      limits.case_timeout_s = timeout;
      limits.memory_limit_mb = c->params.value("memory_limit_mb", int64_t{0});
      limits.launcher_args = o.launcher_args;
      try {
        rec = run_case_in_child(job, limits, ctx.environment, &g_interrupted);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "dlhost: cannot start the case's process: %s\n", e.what());
        return 2;
      }
      if (rec.is_null()) break;  // interrupted: the case has no result
    }
    rec["params_hash"] = params_hash(c->params);
    if (rec["status"] == kStatusOk) {
      std::string key = scaling_key(c->params);
      if (c->params.value("ranks", int64_t{1}) == 1) {
        one_rank.emplace(key, rec);
      } else if (rec.contains("distributed") && one_rank.count(key)) {
        add_scaling(rec, one_rank[key]);
      }
    }
    writer->append(rec);
    ++counts[rec["status"].get<std::string>()];
    std::printf("%s\n", case_line(++index, selected.size(), rec).c_str());
    std::fflush(stdout);
  }
  std::string summary;
  for (const auto& [status, n] : counts)
    summary += (summary.empty() ? "" : ", ") + std::to_string(n) + " " + status;
  if (g_interrupted) {
    std::printf("interrupted after %zu of %zu cases (%s); finish with: dlhost run %s --resume %s\n",
                index, selected.size(), summary.empty() ? "none recorded" : summary.c_str(),
                o.suite.c_str(), out_path.c_str());
    return 130;
  }
  std::printf("done: %s; results in %s\n", summary.empty() ? "no cases" : summary.c_str(),
              out_path.c_str());
  bool bad = counts.count(kStatusFailed) || counts.count(kStatusTimeout) ||
             counts.count(kStatusCrashed) || counts.count(kStatusOom);
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dlhost — benchmarks deep-learning training across compute libraries, hardware and "
      "communication layers, through plugins"};
  app.require_subcommand(1);
  bool verbose = false;
  std::string log_level = "warn";
  std::vector<std::string> plugin_dirs;
  app.add_flag("-v,--verbose", verbose, "Log at debug level");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--plugin-path", plugin_dirs,
                 "Extra plugin folder, searched before the build folder, DLHOST_PLUGIN_PATH and "
                 "the install folder");

  bool as_json = false, describe = false;
  auto* plugins = app.add_subcommand(
      "plugins", "List the plugins found, their devices, and the files refused (with why)");
  plugins->add_flag("--json", as_json, "Print JSON");
  auto* nets = app.add_subcommand(
      "networks", "List the networks: input shape, parameters, forward FLOPs per sample");
  nets->add_flag("--json", as_json, "Print JSON");
  nets->add_flag("-d,--describe", describe, "Print each network's description");

  RunOptions run_opts;
  auto* run = app.add_subcommand("run",
                                 "Run a suite: one line per case as it ends, one JSON record per "
                                 "case appended to the results file");
  run->add_option("suite", run_opts.suite, "Suite file (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  run->add_option("--case", run_opts.cases, "Run only this case id (repeatable)");
  run->add_flag("--dry-run", run_opts.dry_run, "Print the expanded matrix and exit");
  bool quick = false;
  run->add_flag("--quick", quick,
                "A fast look: 1 warm-up and 3 timed mini-batches per case (same as --set warmup=1 "
                "--set iterations=3)");
  run->add_option("-o,--output", run_opts.output,
                  "Results file (JSON lines, appended); default results/<suite>-<time>.jsonl");
  run->add_option("--resume", run_opts.resume,
                  "Append to this results file, running only the cases it has no record of (a "
                  "case whose parameters changed runs again)")
      ->excludes(run->get_option("--output"));
  run->add_option("--launcher-arg", run_opts.launcher_args,
                  "Extra argument for mpirun/srun of multi-rank cases, after the suite's "
                  "launcher_args (repeatable; e.g. --launcher-arg=--hostfile --launcher-arg=hosts)")
      ->allow_extra_args(false);
  run->add_flag("--no-isolate", run_opts.in_process,
                "Run cases inside this process (for debuggers); a crash then ends the suite");
  run->add_option("--set", run_opts.overrides,
                  "Override a suite key for every case, e.g. --set iterations=5 (repeatable)");
  RunOptions validate_opts;
  auto* validate =
      app.add_subcommand("validate", "Check a suite (keys, types, names) without running it");
  validate->add_option("suite", validate_opts.suite, "Suite file (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  validate->add_option("--set", validate_opts.overrides, "Override a suite key, as for run");

  std::vector<Command> commands{add_conform_command(app), add_comm_bench_command(app)};
  auto report_commands = dlhost::report::add_commands(app);  // report, export, compare

  // Internal: one case in this process, for `run` (see case_process.h).
  std::string worker_job;
  auto* worker = app.add_subcommand("case-worker", "")->group("");
  worker->add_option("job", worker_job)->required();

  int local_ranks = 0;
  std::string local_job;
  auto* local = app.add_subcommand("case-local", "")->group("");
  local->add_option("ranks", local_ranks)->required();
  local->add_option("job", local_job)->required();

  CLI11_PARSE(app, argc, argv);
  if (quick) run_opts.overrides.insert(run_opts.overrides.begin(), {"warmup=1", "iterations=3"});

  // The level travels to case workers (and ranks) through the environment.
  if (verbose) log_level = "debug";
  if (app.get_option("--log-level")->count() > 0 || verbose) {
    setenv("DLHOST_LOG_LEVEL", log_level.c_str(), 1);
  } else if (const char* inherited = std::getenv("DLHOST_LOG_LEVEL")) {
    log_level = inherited;
  }
  auto logger = spdlog::stderr_color_mt("dlhost");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
  spdlog::set_level(spdlog::level::from_str(log_level));

  // A case worker loads the plugins its job names, nothing else.
  if (*worker) return case_worker_main(worker_job);
  if (*local) return case_local_main(local_ranks, local_job);
  if (auto rc = report_commands.run_chosen()) return *rc;  // they read files, not plugins

  PluginRegistry registry;
  std::vector<std::string> folders = plugin_dirs;
  for (const auto& f : PluginRegistry::default_search_path()) folders.push_back(f);
  registry.discover(folders);
  run_opts.plugin_folders = folders;
  std::vector<NetworkRef> networks = list_networks(registry);

  for (const auto& c : commands)
    if (*c.sub) return c.run(registry, networks);
  if (*plugins) return cmd_plugins(registry, as_json);
  if (*nets) return cmd_networks(networks, as_json, describe);
  if (*validate) return cmd_run(registry, networks, validate_opts, true);
  return cmd_run(registry, networks, run_opts, false);
}
