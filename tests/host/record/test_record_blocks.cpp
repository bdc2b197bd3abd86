// test_record_blocks.cpp — the typed blocks of a results record (host/record/blocks.h, issue 44
// item 5): every field of every block survives a write and a read back (so a field renamed in
// the writer or in the reader alone fails here), the writers keep the field names and order the
// runner's hand-built JSON had (docs/results-schema.json), and the readers that sit above the
// blocks — the typed fields of record/fields.h, RecordSummary, the report's export columns — find
// every field the writer wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "record/blocks.h"
#include "record/fields.h"
#include "record/record.h"
#include "report/export.h"

namespace dlhost::record {
namespace {

using ordered_json = nlohmann::ordered_json;

// Every field set, none to its default, so a field lost on the way reads differently.
Figures figures(double base) {
  return Figures{true, base + 0.5, base + 0.25, base, base + 1.5, base + 0.125, base + 1.25, 0.75};
}

Backend full_backend() {
  return Backend{"cpu_onednn",
                 "3.1",
                 "/plugins/libcpu_onednn.so",
                 PluginBuild{"gcc 12 -O0", false},
                 Device{2, "local_rank", "cpu0", "Xeon", 16, "avx512_core", 1ULL << 35, "oneDNN 3"},
                 "priority"};
}

Network full_network() {
  return Network{"lenet", "networks_paper", 32, "1x28x28", 431080, 2.5e6, 128};
}

Resolved full_resolved() {
  return Resolved{32,        64,
                  4,         3,
                  "bf16",    Optimizer{"adamw", 0.01, 0.9, 0.0005, 1.5, 0.8, 0.99, 1e-8},
                  "ref:any", std::vector<std::string>{"fused attention", "no dropout"}};
}

Timing full_timing() {
  Timing t;
  t.timer = "host_clock";
  t.input = "data";
  t.upload_pinned = true;
  t.upload_via = "copy_from_host";
  t.warmup = 5;
  t.iterations = 3;
  t.build_ms = 1.5;
  t.compile_ms = 2.5;
  t.init_ms = 3.5;
  t.fused_step = true;
  t.step = figures(10);
  t.forward = figures(3);
  t.backward = figures(5);
  t.update = figures(1);
  t.upload = figures(0.5);
  t.data = figures(0.25);
  t.wall_step = figures(11);
  t.samples_per_second = 3200.5;
  t.samples_per_second_mean = 3100.5;
  t.has_tokens = true;
  t.tokens_per_second = 409664.0;
  t.train_gflops_per_second_est = 24.5;
  t.samples = {{10, 11, 12},
               {3, 3.5, 4},
               {5, 5.5, 6},
               {1, 1.5, 2},
               {11, 12, 13},
               std::vector<double>{0.5, 0.75, 1},
               std::vector<double>{0.25, 0.5, 0.125}};
  return t;
}

Distributed full_distributed() {
  Distributed d;
  d.ranks = 2;
  d.launcher = "mpirun";
  d.comm = "mpi";
  d.host = HostComm{"Open MPI 4.1", true, "bucketed", "comm", {0, 1}, true, 25.5, 3, 1724320};
  d.scaling = "weak";
  d.global_batch = 64;
  d.per_rank_batch = 32;
  d.compute = figures(8);
  d.allreduce = figures(2);
  d.exposed_comm = figures(1);
  d.compute_samples = {8, 9};
  d.allreduce_samples = {2, 3};
  d.exposed_comm_samples = {1, 2};
  d.vs_1_rank = VsOneRank{"lenet.cpu_onednn.r1", 1.75, 0.875};
  return d;
}

// A tool's own runtime: the runtime's fields instead of the host comm's.
Distributed tool_distributed(bool comm_time) {
  Distributed d;
  d.ranks = 4;
  d.launcher = "local";
  d.comm = "torch_ddp";
  d.scaling = "strong";
  d.global_batch = 128;
  d.per_rank_batch = 32;
  d.compute = figures(7);
  d.tool =
      ToolRuntimeFields{"torch_ddp", "sync", "gloo 2.15", std::nullopt, "no hook", std::nullopt};
  d.compute_samples = {7, 8};
  if (comm_time) {
    d.tool->comm_time = "the reducer's wait";
    d.tool->bucket_mb = 25;  // torch_ddp's bucket_cap_mb
    d.allreduce = figures(2);
    d.allreduce_samples = {2, 2.5};
  }
  return d;
}

Loss full_loss() { return Loss{2.5, 2.25, 1.5, {2.25, 2.0, 1.5}}; }

Memory full_memory() {
  return Memory{1000, 2000, 3000, "device_memory_ext", DeviceMemory{10, 20, 30, 40}};
}

std::vector<Warning> full_warnings() {
  return {{"spread", "step times spread widely"}, {"threads", "4 thread(s) x 2 rank(s)"}};
}

// The record's blocks as the runner writes them, as one record.
ordered_json full_record() {
  ordered_json rec = start({"lenet.cpu_onednn", kStatusOk, "", "s", "s.yaml", "s.yaml:3", "t0"},
                           ordered_json{{"network", "lenet"}, {"threads", 4}, {"ranks", 2}});
  rec["backend"] = to_json(full_backend());
  rec["network"] = to_json(full_network());
  rec["resolved"] = to_json(full_resolved());
  rec["timing"] = to_json(full_timing());
  rec["distributed"] = to_json(full_distributed());
  rec["loss"] = to_json(full_loss());
  rec["memory"] = to_json(full_memory());
  finish(rec, 1.5, ordered_json{{"cores", 16}});
  rec["warnings"] = to_json(full_warnings());
  return rec;
}

// Written, then read back from the text a results file holds (and from the record as the runner
// holds it), then written again: the same JSON, so the reader found every field under the name
// the writer gave it.
template <class Block, class Read>
void expect_round_trip(const Block& block, const char* key, Read read) {
  SCOPED_TRACE(key);
  const ordered_json written = to_json(block);
  const ordered_json record{{key, written}};
  const nlohmann::json read_back = nlohmann::json::parse(record.dump());
  auto from_text = read(read_back);
  ASSERT_TRUE(from_text.has_value());
  EXPECT_EQ(to_json(*from_text).dump(), written.dump());
  auto from_record = read(record);
  ASSERT_TRUE(from_record.has_value());
  EXPECT_EQ(to_json(*from_record).dump(), written.dump());
}

TEST(RecordBlocks, EveryFieldSurvivesAWriteAndARead) {
  auto backend = [](const auto& j) { return read_backend(j); };
  expect_round_trip(full_backend(), "backend", backend);
  Backend unsaid = full_backend();
  unsaid.build.reset();  // written null
  expect_round_trip(unsaid, "backend", backend);

  auto network = [](const auto& j) { return read_network(j); };
  expect_round_trip(full_network(), "network", network);
  Network not_language = full_network();
  not_language.tokens_per_sample = 0;
  expect_round_trip(not_language, "network", network);

  auto resolved = [](const auto& j) { return read_resolved(j); };
  expect_round_trip(full_resolved(), "resolved", resolved);
  Resolved sgd = full_resolved();
  sgd.optimizer = Optimizer{"sgd", 0.125, 0.9, 0.0005, 0, 0, 0, 0};
  sgd.departures.clear();
  expect_round_trip(sgd, "resolved", resolved);

  auto timing = [](const auto& j) { return read_timing(j, true); };
  expect_round_trip(full_timing(), "timing", timing);
  Timing resident = full_timing();
  resident.input = "resident";
  resident.upload_pinned.reset();
  resident.upload_via.clear();
  resident.upload.reset();
  resident.data.reset();
  resident.samples.upload.reset();
  resident.samples.data.reset();
  resident.has_tokens = false;
  resident.tokens_per_second.reset();
  expect_round_trip(resident, "timing", timing);
  Timing timed_out = full_timing();  // before its first timed step: null figures and rates
  timed_out.iterations = 0;
  timed_out.step = timed_out.forward = timed_out.backward = timed_out.update = Figures{};
  timed_out.wall_step = Figures{};
  timed_out.samples_per_second.reset();
  timed_out.samples_per_second_mean.reset();
  timed_out.tokens_per_second.reset();
  timed_out.train_gflops_per_second_est.reset();
  expect_round_trip(timed_out, "timing", timing);

  auto distributed = [](const auto& j) { return read_distributed(j, true); };
  expect_round_trip(full_distributed(), "distributed", distributed);
  expect_round_trip(tool_distributed(true), "distributed", distributed);
  expect_round_trip(tool_distributed(false), "distributed", distributed);

  auto loss = [](const auto& j) { return read_loss(j); };
  expect_round_trip(full_loss(), "loss", loss);
  expect_round_trip(Loss{std::nullopt, std::nullopt, std::nullopt, {}}, "loss", loss);

  auto memory = [](const auto& j) { return read_memory(j); };
  expect_round_trip(full_memory(), "memory", memory);
  Memory host_only = full_memory();
  host_only.source = "memory_in_use";
  host_only.device.reset();
  expect_round_trip(host_only, "memory", memory);

  const ordered_json warnings = to_json(full_warnings());
  const auto read =
      read_warnings(nlohmann::json::parse(ordered_json{{"warnings", warnings}}.dump()));
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(to_json(*read).dump(), warnings.dump());
  EXPECT_FALSE(read_warnings(nlohmann::json::parse(R"j({"timing":{}})j")).has_value());
}

std::vector<std::string> keys(const ordered_json& j) {
  std::vector<std::string> out;
  for (const auto& [key, value] : j.items()) out.push_back(key);
  return out;
}

using Keys = std::vector<std::string>;

// The names and order the runner's hand-built JSON wrote (run/runner.cpp before the blocks).
TEST(RecordBlocks, TheWritersKeepTheRecordsFieldNamesAndOrder) {
  const Keys figure_keys{"mean", "median", "min", "max", "p5", "p95", "stddev"};
  EXPECT_EQ(keys(to_json(figures(1))), figure_keys);
  EXPECT_EQ(to_json(Figures{}).dump(),
            R"j({"mean":null,"median":null,"min":null,"max":null,"p5":null,"p95":null,)j"
            R"j("stddev":null})j");

  const ordered_json b = to_json(full_backend());
  EXPECT_EQ(keys(b), (Keys{"name", "version", "path", "build", "device", "chosen_by"}));
  EXPECT_EQ(b["build"].dump(), R"j({"text":"gcc 12 -O0","optimized":false})j");
  EXPECT_EQ(keys(b["device"]), (Keys{"index", "selected_by", "name", "model", "cores", "isa",
                                     "memory_bytes", "library"}));
  Backend unsaid = full_backend();
  unsaid.build.reset();
  EXPECT_TRUE(to_json(unsaid)["build"].is_null());

  EXPECT_EQ(keys(to_json(full_network())), (Keys{"name", "plugin", "batch", "input_shape", "params",
                                                 "forward_flops_per_sample", "tokens_per_sample"}));
  Network not_language = full_network();
  not_language.tokens_per_sample = 0;
  EXPECT_FALSE(to_json(not_language).contains("tokens_per_sample"));
  EXPECT_EQ(to_json(full_network())["tokens_per_sample"].dump(), "128");  // the int it is

  const ordered_json r = to_json(full_resolved());
  EXPECT_EQ(keys(r), (Keys{"batch", "global_batch", "threads_requested", "threads_used",
                           "precision", "optimizer", "implementation", "departures"}));
  EXPECT_EQ(keys(r["optimizer"]), (Keys{"kind", "lr", "momentum", "weight_decay", "clip_norm",
                                        "beta1", "beta2", "epsilon"}));
  Resolved sgd = full_resolved();
  sgd.optimizer.kind = "sgd";
  sgd.departures.clear();
  EXPECT_EQ(keys(to_json(sgd)["optimizer"]),
            (Keys{"kind", "lr", "momentum", "weight_decay", "clip_norm"}));
  EXPECT_FALSE(to_json(sgd).contains("departures"));

  const ordered_json t = to_json(full_timing());
  EXPECT_EQ(keys(t), (Keys{"unit",
                           "timer",
                           "input",
                           "upload_pinned",
                           "upload_via",
                           "warmup",
                           "iterations",
                           "build_ms",
                           "compile_ms",
                           "init_ms",
                           "fused_step",
                           "step",
                           "forward",
                           "backward",
                           "update",
                           "upload",
                           "data",
                           "wall_step",
                           "samples_per_second",
                           "samples_per_second_mean",
                           "tokens_per_second",
                           "train_gflops_per_second_est",
                           "samples"}));
  EXPECT_EQ(t["unit"], "ms");
  EXPECT_EQ(keys(t["samples"]),
            (Keys{"step", "forward", "backward", "update", "wall_step", "upload", "data"}));

  const ordered_json d = to_json(full_distributed());
  EXPECT_EQ(keys(d), (Keys{"ranks",         "launcher",       "comm",
                           "comm_library",  "comm_on_stream", "gradient_path",
                           "control_plane", "devices",        "scaling",
                           "global_batch",  "per_rank_batch", "overlap",
                           "bucket_mb",     "buckets",        "allreduce_bytes_per_step",
                           "compute",       "allreduce",      "exposed_comm",
                           "samples",       "vs_1_rank"}));
  EXPECT_EQ(keys(d["samples"]), (Keys{"compute", "allreduce", "exposed_comm"}));
  EXPECT_EQ(keys(d["vs_1_rank"]), (Keys{"baseline_case", "speedup", "efficiency"}));
  EXPECT_EQ(keys(to_json(tool_distributed(true))),
            (Keys{"ranks", "launcher", "comm", "scaling", "global_batch", "per_rank_batch",
                  "compute", "runtime", "mode", "runtime_library", "bucket_mb", "comm_time",
                  "allreduce", "samples"}));
  EXPECT_EQ(keys(to_json(tool_distributed(true))["samples"]), (Keys{"compute", "allreduce"}));
  EXPECT_EQ(keys(to_json(tool_distributed(false))),
            (Keys{"ranks", "launcher", "comm", "scaling", "global_batch", "per_rank_batch",
                  "compute", "runtime", "mode", "runtime_library", "comm_time_absent", "samples"}));
  EXPECT_EQ(keys(to_json(tool_distributed(false))["samples"]), (Keys{"compute"}));

  EXPECT_EQ(to_json(full_loss()).dump(),
            R"j({"warmup_first":2.5,"first":2.25,"last":1.5,"values":[2.25,2.0,1.5]})j");
  EXPECT_EQ(to_json(Loss{}).dump(),
            R"j({"warmup_first":null,"first":null,"last":null,"values":[]})j");
  EXPECT_EQ(to_json(full_memory()).dump(),
            R"j({"peak_rss_bytes":1000,"backend_bytes":2000,"backend_peak_bytes":3000,)j"
            R"j("source":"device_memory_ext","device":{"in_use_bytes":10,"peak_bytes":20,)j"
            R"j("free_bytes":30,"total_bytes":40}})j");
  EXPECT_EQ(to_json(full_warnings()).dump(),
            R"j([{"code":"spread","message":"step times spread widely"},)j"
            R"j({"code":"threads","message":"4 thread(s) x 2 rank(s)"}])j");
}

// A tool that owns its loop (ABI 1.5 DLHOST_EXT_STEP_LOOP, run/owned_loop.h): the timing block's
// `clock`, `loop` and `owned_loop_ms` are typed fields, written after the samples only for such a
// case, and read back.
Timing owned_loop_timing() {
  Timing t = full_timing();  // real data: the host still feeds each step (StepLoop::feed_step)
  t.timer = "backend_clock";
  t.forward = t.backward = t.update = Figures{};  // the tool splits no phase
  t.owned_loop =
      OwnedLoopFields{"LocalOptimizer's per-iteration timer", "one optimize() call", 61.5};
  return t;
}

TEST(RecordBlocks, TheOwnedLoopsTimingFieldsAreTyped) {
  const Timing owned = owned_loop_timing();
  expect_round_trip(owned, "timing", [](const auto& j) { return read_timing(j, true); });
  const ordered_json t = to_json(owned);
  // The block's other fields as for any case, then the three, after the samples.
  Timing without = owned;
  without.owned_loop.reset();
  Keys expected = keys(to_json(without));
  ASSERT_EQ(expected.back(), "samples");
  expected.insert(expected.end(), {"clock", "loop", "owned_loop_ms"});
  EXPECT_EQ(keys(t), expected);
  EXPECT_EQ(t["clock"], "LocalOptimizer's per-iteration timer");
  EXPECT_EQ(t["loop"], "one optimize() call");
  EXPECT_EQ(t["owned_loop_ms"].dump(), "61.5");
  // Read back from a results file's text: the three fields, typed.
  const auto read = read_timing(nlohmann::json::parse(ordered_json{{"timing", t}}.dump()));
  ASSERT_TRUE(read.has_value() && read->owned_loop.has_value());
  EXPECT_EQ(read->owned_loop->clock, "LocalOptimizer's per-iteration timer");
  EXPECT_EQ(read->owned_loop->loop, "one optimize() call");
  EXPECT_EQ(read->owned_loop->call_ms, 61.5);
  // Every other case: none of the three written, none read.
  const ordered_json host_loop = to_json(full_timing());
  for (const char* key : {"clock", "loop", "owned_loop_ms"}) EXPECT_FALSE(host_loop.contains(key));
  EXPECT_FALSE(read_timing(ordered_json{{"timing", host_loop}})->owned_loop.has_value());
}

// The typed fields the report, compare and project read (record/fields.h) and the console line's
// RecordSummary find the values the writer wrote, from the record as a results file holds it.
TEST(RecordBlocks, TheReadersAboveTheBlocksFindWhatTheWriterWrote) {
  const ordered_json written = full_record();
  const Record r{nlohmann::json::parse(written.dump()), "f.jsonl", 1};
  EXPECT_EQ(network(r), "lenet");
  EXPECT_EQ(backend(r), "cpu_onednn");
  EXPECT_EQ(threads(r), 3);  // used, not requested
  EXPECT_EQ(batch(r), 32);
  EXPECT_EQ(ranks(r), 2);
  EXPECT_EQ(per_rank_batch(r), 32);
  EXPECT_EQ(step_median_ms(r), 10.25);
  const StepParts parts = step_parts(r);
  EXPECT_EQ(parts.forward_ms, 3.25);
  EXPECT_EQ(parts.backward_ms, 5.25);
  EXPECT_EQ(parts.update_ms, 1.25);
  EXPECT_EQ(timer(r), "host_clock");
  EXPECT_TRUE(fused_step(r));
  EXPECT_EQ(step_samples(r), (std::vector<double>{10, 11, 12}));
  EXPECT_EQ(data_wait_ms(r).value_or(-1), 0.5);
  const DistributedFigures d = distributed_of(r);
  EXPECT_EQ(d.comm, "mpi");
  EXPECT_EQ(d.scaling, "weak");
  EXPECT_EQ(d.global_batch, 64);
  EXPECT_EQ(d.compute_ms, 8.25);
  EXPECT_EQ(d.allreduce_ms, 2.25);
  EXPECT_EQ(d.exposed_comm_ms, 1.25);
  EXPECT_EQ(d.speedup_vs_1_rank, 1.75);

  for (const RecordSummary& s : {RecordSummary::of(written), RecordSummary::of(r.data)}) {
    EXPECT_TRUE(s.timed);
    EXPECT_EQ(s.iterations, 3);
    EXPECT_EQ(s.median_ms, 10.25);
    EXPECT_EQ(s.p5_ms, 10.125);
    EXPECT_EQ(s.p95_ms, 11.25);
    EXPECT_EQ(s.samples_per_second, 3200.5);
    EXPECT_EQ(s.data_ms, 0.5);
    EXPECT_EQ(s.ranks, 2);
    EXPECT_TRUE(s.weak);
    EXPECT_EQ(s.backend, "cpu_onednn");
    EXPECT_TRUE(s.backend_by_priority);
  }
}

// Export names its columns by JSON pointer (one line a column): every column into a typed block
// finds a value in a record whose blocks are all written.
TEST(RecordBlocks, EveryExportColumnIntoABlockFindsTheWritersField) {
  const std::vector<std::string> into_blocks = {"backend_library",
                                                "device_model",
                                                "per_rank_batch",
                                                "threads_requested",
                                                "threads_used",
                                                "warmup",
                                                "iterations",
                                                "step_median_ms",
                                                "step_mean_ms",
                                                "step_min_ms",
                                                "step_max_ms",
                                                "step_p5_ms",
                                                "step_p95_ms",
                                                "step_stddev_ms",
                                                "forward_median_ms",
                                                "backward_median_ms",
                                                "update_median_ms",
                                                "compile_ms",
                                                "samples_per_second",
                                                "samples_per_second_mean",
                                                "train_gflops_per_second_est",
                                                "forward_flops_per_sample",
                                                "network_params",
                                                "compute_median_ms",
                                                "allreduce_median_ms",
                                                "exposed_comm_median_ms",
                                                "allreduce_bytes_per_step",
                                                "speedup_vs_1_rank",
                                                "efficiency_vs_1_rank",
                                                "loss_first",
                                                "loss_last",
                                                "peak_rss_bytes"};
  const std::vector<std::string> columns = report::export_columns();
  const Record r{nlohmann::json::parse(full_record().dump()), "f.jsonl", 1};
  const std::vector<std::vector<std::string>> rows = report::export_rows({r});
  ASSERT_EQ(rows.size(), 2u);  // the header, then the record
  ASSERT_EQ(rows[1].size(), columns.size());
  for (const std::string& name : into_blocks) {
    const auto at = std::find(columns.begin(), columns.end(), name);
    ASSERT_NE(at, columns.end()) << "export has no column " << name;
    EXPECT_FALSE(rows[1][static_cast<size_t>(at - columns.begin())].empty())
        << "export column " << name << " finds no value in a record of every block";
  }
}

}  // namespace
}  // namespace dlhost::record
