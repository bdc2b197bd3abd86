// blocks.h — the typed blocks of a results record between its head and its tail (record.h):
// backend, network, resolved, timing, distributed, loss, memory and warnings, as
// docs/results-schema.json describes them. Each block is one struct with one writer (`to_json`:
// the fields in the record's order) and one reader (`read_*`), both walking the block's ONE field
// list in blocks.cpp (`fields`: the record's key and the struct's member, in the record's order),
// so a field's name is spelt once for both (google/benchmark's typed `Run` and its reporters). The
// runner fills the structs and writes them; the host's readers (the console's warnings, report,
// compare, project, the console line and --resume through RecordSummary) read them back.
//
// Readers are lenient as the readers before them were: a record comes from anyone, so a field
// that is absent or of another type reads as its default (0, "", false, absent), never throws.
// Pure functions; thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace dlhost::record {

// --- the blocks --------------------------------------------------------------------------------

// One time's summary over the timed steps, in ms. Not measured (a case that timed out before
// its first timed step): every figure is written null, none 0, which a reader would take for a
// measured time.
struct Figures {
  bool measured = false;
  double mean = 0, median = 0, min = 0, max = 0, p5 = 0, p95 = 0, stddev = 0;
};

// `backend`: the plugin that ran the case and the device it ran on.
struct Device {
  int32_t index = 0;
  std::string selected_by;  // "suite" or "local_rank"
  std::string name, model;
  int32_t cores = 0;
  std::string isa;
  uint64_t memory_bytes = 0;
  std::string library;
};
struct PluginBuild {  // how the plugin was compiled (DLHOST_PLUGIN_BUILD_SYMBOL)
  std::string text;
  bool optimized = true;
};
struct Backend {
  std::string name, version, path;
  std::optional<PluginBuild> build;  // null when the plugin does not say
  Device device;
  std::string chosen_by;  // "suite", or "priority" when the host chose it
};

// `network`: the graph the case trained.
struct Network {
  std::string name, plugin;
  int64_t batch = 0;  // per rank
  std::string input_shape;
  int64_t params = 0;
  double forward_flops_per_sample = 0;
  // Language models only; 0: not written. A double, so a reader keeps a count beyond int64 as
  // the record wrote it (issue 43); written as the integer it is.
  double tokens_per_sample = 0;
};

// `resolved`: what the case's settings came to.
struct Optimizer {
  std::string kind;  // "sgd", "adamw"
  double lr = 0, momentum = 0, weight_decay = 0, clip_norm = 0;
  // AdamW only (written only for kind "adamw").
  double beta1 = 0, beta2 = 0, epsilon = 0;
};
struct Resolved {
  int64_t batch = 0, global_batch = 0;
  int64_t threads_requested = 0;
  int32_t threads_used = 0;
  std::string precision;
  Optimizer optimizer;
  std::string implementation;
  std::vector<std::string> departures;  // ABI 1.5; not written when empty
};

// `timing`: the timed loop. Samples are per timed step; the readers that only need the figures
// leave them out (read_timing's `with_samples`).
struct TimingSamples {
  std::vector<double> step, forward, backward, update, wall_step;
  std::optional<std::vector<double>> upload, data;  // as the figures of the same name
};
struct OwnedLoopFields {
  std::string clock;   // `clock`: what the tool's step time measures, in the backend's words
  std::string loop;    // `loop`: how the tool ran the steps
  double call_ms = 0;  // `owned_loop_ms`: the host clock around the tool's one call
};
struct Timing {
  std::string timer;  // "device_events", "host_clock" or "backend_clock"
  std::string input;  // "resident", "upload" or "data"
  // Uploaded or real-data inputs only: pinned staging memory, and the way to the device.
  std::optional<bool> upload_pinned;
  std::string upload_via;  // written with upload_pinned
  int64_t warmup = 0, iterations = 0;
  double build_ms = 0, compile_ms = 0, init_ms = 0;
  bool fused_step = false;
  Figures step, forward, backward, update;
  std::optional<Figures> upload, data;
  Figures wall_step;
  // Rates at the median (and mean) step: absent (null) without a measured step.
  std::optional<double> samples_per_second, samples_per_second_mean;
  bool has_tokens = false;  // language models: tokens_per_second is written (null or a rate)
  std::optional<double> tokens_per_second;
  std::optional<double> train_gflops_per_second_est;
  TimingSamples samples;
  // A tool that owns its loop (timer "backend_clock", ABI 1.5 DLHOST_EXT_STEP_LOOP,
  // run/owned_loop.h); written after the samples.
  std::optional<OwnedLoopFields> owned_loop;
};

// `distributed`: a case over ranks, data parallel through a host comm or a tool's own runtime.
struct HostComm {  // a host comm plugin's case
  std::string comm_library;
  bool comm_on_stream = false;
  std::string gradient_path, control_plane;
  std::vector<int64_t> devices;  // every rank's device index
  bool overlap = false;
  double bucket_mb = 0;
  int64_t buckets = 0, allreduce_bytes_per_step = 0;
};
struct ToolRuntimeFields {  // a tool's own runtime (DLHOST_EXT_TOOL_RUNTIME)
  std::string runtime, mode, runtime_library;
  std::optional<std::string> comm_time;  // what the runtime times, or why it times nothing:
  std::string comm_time_absent;          // written when comm_time is absent
  std::optional<double> bucket_mb;       // torch_ddp's bucket_cap_mb; written after the library
};
struct VsOneRank {  // against the 1-rank record of the same case (run/record.h)
  std::string baseline_case;
  double speedup = NAN;  // NaN: not known (what a reader finds when the record lacks it)
  double efficiency = 0;
};
struct Distributed {
  int64_t ranks = 1;
  std::string launcher, comm;
  std::optional<HostComm> host;
  std::string scaling;  // "strong" or "weak"
  int64_t global_batch = 0, per_rank_batch = 0;
  Figures compute;
  std::optional<ToolRuntimeFields> tool;
  std::optional<Figures> allreduce, exposed_comm;  // a tool runtime may time no comm
  // Per timed step; allreduce and exposed_comm written where their figures are.
  std::vector<double> compute_samples, allreduce_samples, exposed_comm_samples;
  std::optional<VsOneRank> vs_1_rank;
};

// `loss`: the training loss per timed step (the first values null when there were none).
struct Loss {
  std::optional<double> warmup_first, first, last;
  std::vector<double> values;
};

// `memory`: the process's and the backend's peaks.
struct DeviceMemory {
  uint64_t in_use_bytes = 0, peak_bytes = 0, free_bytes = 0, total_bytes = 0;
};
struct Memory {
  uint64_t peak_rss_bytes = 0, backend_bytes = 0, backend_peak_bytes = 0;
  std::string source;                  // "device_memory_ext" or "memory_in_use"
  std::optional<DeviceMemory> device;  // with the device memory extension
};

// `warnings`: what may have disturbed the case or makes its figures unlike others.
struct Warning {
  std::string code, message;
};
using Warnings = std::vector<Warning>;

// --- writers: the block as the record holds it -------------------------------------------------

nlohmann::ordered_json to_json(const Figures& f);
nlohmann::ordered_json to_json(const Backend& b);
nlohmann::ordered_json to_json(const Network& n);
nlohmann::ordered_json to_json(const Optimizer& o);
nlohmann::ordered_json to_json(const Resolved& r);
nlohmann::ordered_json to_json(const Timing& t);
nlohmann::ordered_json to_json(const VsOneRank& v);
nlohmann::ordered_json to_json(const Distributed& d);
nlohmann::ordered_json to_json(const Loss& l);
nlohmann::ordered_json to_json(const Memory& m);
nlohmann::ordered_json to_json(const std::vector<Warning>& w);

// --- readers: the block of a record (the record itself, not the block), as written (ordered)
// or as read back; absent blocks read as nullopt -------------------------------------------------

template <class Json>
Figures read_figures(const Json& block);  // a Figures object itself (timing.step)
template <class Json>
std::optional<Backend> read_backend(const Json& record);
template <class Json>
std::optional<Network> read_network(const Json& record);
template <class Json>
std::optional<Resolved> read_resolved(const Json& record);
template <class Json>
std::optional<Timing> read_timing(const Json& record, bool with_samples = false);
template <class Json>
std::optional<Distributed> read_distributed(const Json& record, bool with_samples = false);
template <class Json>
std::optional<Loss> read_loss(const Json& record);
template <class Json>
std::optional<Memory> read_memory(const Json& record);
// nullopt: the record has no `warnings` array (written before warnings existed).
template <class Json>
std::optional<std::vector<Warning>> read_warnings(const Json& record);

// The record's block `key` when the record has it as an object, else null (a reader's first
// step; also for the blocks with no struct here: backward_profile, data, evaluation...).
template <class Json>
const Json* block_of(const Json& record, const char* key);

}  // namespace dlhost::record
