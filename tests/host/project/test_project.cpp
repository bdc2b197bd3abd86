// test_project.cpp — `dlhost project`'s model (project/projection.h) against cases computed by
// hand: the ring all-reduce cost, the runner's bucketing, the overlapped schedule of the DAG
// model when the link keeps up and when it does not, the alpha-beta fit recovering a known line,
// the named interconnects; then the command end to end on small files (a profile record, a
// comm-bench document, a measured 2-rank record) down to the error it prints.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "project/command.h"
#include "project/projection.h"
#include "project/runtime_model.h"

namespace {

using namespace dlhost::project;

constexpr uint64_t KiB = 1024;

Link link(double alpha_us, double beta_us_per_byte) {
  Link l;
  l.name = "test";
  l.alpha_us = alpha_us;
  l.beta_us_per_byte = beta_us_per_byte;
  return l;
}

TEST(Projection, RingAllReduceCost) {
  Link l = link(10, 0.001);
  // N = 2: 2 (1/2) 1e6 B x 0.001 us/B + 2 x 10 us = 1020 us.
  EXPECT_NEAR(ring_allreduce_ms(1000000, 2, l), 1.020, 1e-12);
  // N = 4: 2 (3/4) 1e6 x 0.001 + 6 x 10 = 1560 us.
  EXPECT_NEAR(ring_allreduce_ms(1000000, 4, l), 1.560, 1e-12);
  EXPECT_EQ(ring_allreduce_ms(1000000, 1, l), 0.0);
}

// Four gradients: param 0 and 1 of 600 KiB, 2 of 300 KiB, 3 of 200 KiB; backward reports 3
// first (1 ms), then 2 (2 ms), 1 (5 ms), 0 (6 ms).
ComputeProfile four_gradients() {
  ComputeProfile p;
  p.forward_ms = 10;
  p.backward_ms = 6;
  p.update_ms = 2;
  p.gradients = {{0, "fc1.weight", 600 * KiB, 6.0},
                 {1, "fc1.bias", 600 * KiB, 5.0},
                 {2, "fc2.weight", 300 * KiB, 2.0},
                 {3, "fc2.bias", 200 * KiB, 1.0}};
  return p;
}

TEST(Projection, BucketsFollowTheRunner) {
  // 1 MiB buckets in reverse parameter order: {3, 2} (500 KiB), then 1 would make 1100 KiB:
  // {1}, then {0}.
  std::vector<Bucket> b = make_buckets(four_gradients().gradients, 1.0);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(b[0].bytes, 500 * KiB);
  EXPECT_EQ(b[0].ready_ms, 2.0);  // its last gradient's
  EXPECT_EQ(b[1].params, (std::vector<int32_t>{1}));
  EXPECT_EQ(b[2].params, (std::vector<int32_t>{0}));
  // A gradient larger than a bucket is a bucket of its own; everything fits one big bucket.
  EXPECT_EQ(make_buckets({{0, "", 3 << 20, 1.0}}, 1.0).size(), 1u);
  EXPECT_EQ(make_buckets(four_gradients().gradients, 25.0).size(), 1u);
}

TEST(Projection, LinkThatKeepsUpLeavesOnlyTheLastBucketExposed) {
  // 2 ranks, no latency, 1 GB/s: a bucket of B bytes takes B / 1000 us.
  Projection p = project(four_gradients(), 2, link(0, 0.001), 1.0);
  const double c0 = 500 * 1024 / 1e6, c1 = 600 * 1024 / 1e6;  // 0.512 and 0.6144 ms
  EXPECT_NEAR(p.compute_ms, 18.0, 1e-12);
  EXPECT_NEAR(p.comm_ms, c0 + 2 * c1, 1e-9);
  EXPECT_NEAR(p.step_ms_no_overlap, 18.0 + c0 + 2 * c1, 1e-9);
  // Overlap: {3,2} at 2..2.512, {1} at 5..5.6144, {0} at 6..6.6144: 0.6144 ms past backward.
  ASSERT_EQ(p.buckets.size(), 3u);
  EXPECT_NEAR(p.buckets[0].start_ms, 2.0, 1e-12);
  EXPECT_NEAR(p.buckets[1].start_ms, 5.0, 1e-12);
  EXPECT_NEAR(p.buckets[2].end_ms, 6.0 + c1, 1e-9);
  EXPECT_NEAR(p.exposed_ms_overlap, c1, 1e-9);
  EXPECT_NEAR(p.step_ms_overlap, 18.0 + c1, 1e-9);
  EXPECT_NEAR(p.efficiency_overlap, 18.0 / (18.0 + c1), 1e-12);
  EXPECT_NEAR(p.efficiency_no_overlap, 18.0 / (18.0 + c0 + 2 * c1), 1e-12);
}

TEST(Projection, SlowLinkQueuesTheBuckets) {
  // 10x slower: 5.12, 6.144, 6.144 ms. {3,2} 2..7.12; {1} waits for the link: 7.12..13.264;
  // {0} 13.264..19.408; exposed 19.408 - 6 = 13.408.
  Projection p = project(four_gradients(), 2, link(0, 0.01), 1.0);
  EXPECT_NEAR(p.buckets[1].start_ms, 7.12, 1e-9);
  EXPECT_NEAR(p.buckets[2].start_ms, 13.264, 1e-9);
  EXPECT_NEAR(p.exposed_ms_overlap, 13.408, 1e-9);
  EXPECT_NEAR(p.step_ms_overlap, 31.408, 1e-9);
  EXPECT_NEAR(p.step_ms_no_overlap, 35.408, 1e-9);
  // More ranks cost more per byte (2 (N-1)/N) and per message (2 (N-1) alpha).
  Projection four = project(four_gradients(), 4, link(100, 0.01), 1.0);
  EXPECT_NEAR(four.comm_ms, (1.5 * (1700 * 1024) * 0.01 + 3 * 6 * 100) / 1000, 1e-9);
  // One rank communicates nothing.
  Projection one = project(four_gradients(), 1, link(100, 0.01), 1.0);
  EXPECT_EQ(one.step_ms_overlap, 18.0);
  EXPECT_EQ(one.efficiency_no_overlap, 1.0);
}

TEST(Projection, FitRecoversAKnownLine) {
  // 2 ranks: time = 2 alpha + beta x bytes, alpha 20 us, beta 0.0005 us/byte.
  std::vector<std::pair<double, double>> points;
  for (double x = 1024; x <= 64.0 * 1024 * 1024; x *= 4) points.emplace_back(x, 40 + 0.0005 * x);
  Fit f = fit_alpha_beta(points, 2);
  EXPECT_NEAR(f.a_us, 40, 1e-6);
  EXPECT_NEAR(f.b_us_per_byte, 0.0005, 1e-12);
  EXPECT_NEAR(f.link.alpha_us, 20, 1e-6);
  EXPECT_NEAR(f.link.beta_us_per_byte, 0.0005, 1e-12);
  EXPECT_LT(f.max_relative_error, 1e-9);
  EXPECT_EQ(f.points, 9);  // 1 KiB, 4 KiB, ... 64 MiB
  // 4 ranks: a = 6 alpha, b = 1.5 beta.
  Fit four = fit_alpha_beta(points, 4);
  EXPECT_NEAR(four.link.alpha_us, 40.0 / 6, 1e-6);
  EXPECT_NEAR(four.link.beta_us_per_byte, 0.0005 / 1.5, 1e-12);
  // Noisy points: the relative fit stays near, the worst point is reported.
  points[0].second *= 1.2;
  Fit noisy = fit_alpha_beta(points, 2);
  EXPECT_NEAR(noisy.b_us_per_byte, 0.0005, 0.00002);
  EXPECT_GT(noisy.max_relative_error, 0.01);
  EXPECT_THROW(fit_alpha_beta({{1024, 5}}, 2), std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta(points, 1), std::invalid_argument);
}

TEST(Projection, BinomialAllReduceCost) {
  Link l = link(10, 0.001);
  l.algorithm = Algorithm::kBinomial;
  // N = 2: one round up, one down, the whole 1e6 B each: 2 x (1000 + 10) us.
  EXPECT_NEAR(allreduce_ms(1000000, 2, l), 2.020, 1e-12);
  // N = 4 and 5: 2 and 3 rounds each way.
  EXPECT_NEAR(allreduce_ms(1000000, 4, l), 4.040, 1e-12);
  EXPECT_NEAR(allreduce_ms(1000000, 5, l), 6.060, 1e-12);
  EXPECT_EQ(allreduce_ms(1000000, 1, l), 0.0);
  EXPECT_EQ(parse_algorithm("binomial"), Algorithm::kBinomial);
  EXPECT_THROW(parse_algorithm("tree"), std::invalid_argument);
  // A fit by either algorithm gives its own line back on the ranks it was measured on.
  std::vector<std::pair<double, double>> points;
  for (double x = 1024; x <= 4.0 * 1024 * 1024; x *= 4) points.emplace_back(x, 30 + 0.004 * x);
  for (Algorithm a : {Algorithm::kRing, Algorithm::kBinomial}) {
    Fit f = fit_alpha_beta(points, 4, a);
    EXPECT_NEAR(allreduce_ms(1 << 20, 4, f.link), (30 + 0.004 * (1 << 20)) / 1000, 1e-9);
  }
  // Scaled to 8 ranks: binomial 3/2 of the 4-rank time, ring (7/4)/(3/2) of its bytes term.
  Fit b = fit_alpha_beta(points, 4, Algorithm::kBinomial);
  EXPECT_NEAR(allreduce_ms(1 << 20, 8, b.link), 1.5 * (30 + 0.004 * (1 << 20)) / 1000, 1e-9);
}

TEST(Projection, FitOverTheNamedLinkIsTakenAsMeasured) {
  Fit f;
  f.ranks = 2;
  f.link = link(40, 0.016);
  f.interconnect = "1gbe";
  Link gbe = interconnect("1gbe", &f);
  EXPECT_EQ(gbe.alpha_us, 40);  // no nominal 50 us on top
  EXPECT_EQ(gbe.beta_us_per_byte, 0.016);
  EXPECT_EQ(gbe.source, "as measured on 2 ranks over 1gbe test hosts");
  Link ten = interconnect("10gbe", &f);  // another link: nominal, over this fit
  EXPECT_EQ(ten.alpha_us, 50);
  EXPECT_NE(ten.source.find("nominal 10gbe"), std::string::npos) << ten.source;
  EXPECT_THROW(interconnect("loopback", &f), std::invalid_argument);
  f.interconnect = "custom";
  f.link_gbit = 0.5;
  EXPECT_TRUE(measured_on(f, "custom", 0.5, 0));
  EXPECT_FALSE(measured_on(f, "custom", 2, 0));
  EXPECT_EQ(interconnect("custom", &f, 0.5).alpha_us, 40);
  EXPECT_EQ(interconnect("custom", &f, 2).alpha_us, 40);  // 2 Gbit/s, no latency: nominal
  EXPECT_EQ(interconnect("custom", &f, 2).beta_us_per_byte, 0.016);
  EXPECT_NE(interconnect("custom", &f, 2).source.find("nominal"), std::string::npos);
}

TEST(Projection, NamedInterconnects) {
  Link gbe = interconnect("1gbe", nullptr);
  EXPECT_NEAR(gbe.beta_us_per_byte, 0.008, 1e-15);  // 1 Gbit/s = 125 bytes/us
  EXPECT_EQ(gbe.alpha_us, 50);
  Fit f;
  f.link = link(20, 0.0005);
  Link ten = interconnect("10gbe", &f);
  EXPECT_NEAR(ten.beta_us_per_byte, 0.0008, 1e-15);  // the wire is slower than the host
  EXPECT_EQ(ten.alpha_us, 30);
  Link lo = interconnect("loopback", &f);
  EXPECT_EQ(lo.alpha_us, 20);
  EXPECT_EQ(lo.beta_us_per_byte, 0.0005);
  Link custom = interconnect("custom", &f, 100, 5);  // 100 Gbit/s: the host is slower
  EXPECT_EQ(custom.beta_us_per_byte, 0.0005);
  EXPECT_EQ(custom.alpha_us, 25);
  EXPECT_THROW(interconnect("loopback", nullptr), std::invalid_argument);
  EXPECT_THROW(interconnect("custom", &f), std::invalid_argument);
  EXPECT_THROW(interconnect("infiniband", &f), std::invalid_argument);
}

std::string write(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              ("dlhost-test-project-" + std::to_string(getpid()) + "-" + name);
  std::ofstream(path) << text;
  return path.string();
}

// A 1-rank record of LeNet with four_gradients() as its backward_profile.
nlohmann::json lenet_profile_record() {
  using json = nlohmann::json;
  json gradients = json::array();
  for (const auto& g : four_gradients().gradients)
    gradients.push_back(
        {{"param", g.param}, {"name", g.name}, {"bytes", g.bytes}, {"ready_ms", g.ready_ms}});
  return {
      {"schema_version", 1},
      {"case_id", "lenet-1"},
      {"status", "OK"},
      {"params", {{"network", "lenet"}, {"backend", "cpu_onednn"}, {"batch", 32}, {"ranks", 1}}},
      {"timing",
       {{"forward", {{"median", 10.0}}},
        {"backward", {{"median", 6.0}}},
        {"update", {{"median", 2.0}}}}},
      {"backward_profile", {{"source", "test"}, {"backward_ms", 6.0}, {"gradients", gradients}}}};
}

TEST(ProjectCommand, FilesToTableAndError) {
  using json = nlohmann::json;
  json profile = lenet_profile_record();
  // Measured on 2 ranks, 32 each, overlap on: 20 ms.
  json measured = {{"schema_version", 1},
                   {"case_id", "lenet-2"},
                   {"status", "OK"},
                   {"params", {{"network", "lenet"}, {"backend", "cpu_onednn"}, {"batch", 64}}},
                   {"timing", {{"step", {{"median", 20.0}}}}},
                   {"distributed",
                    {{"ranks", 2},
                     {"per_rank_batch", 32},
                     {"overlap", true},
                     {"exposed_comm", {{"median", 1.0}}}}}};
  // comm-bench on 2 ranks: time = 0 + 0.001 us/byte x size (1 GB/s, no latency).
  json rows = json::array();
  for (double x = 1024; x <= 4.0 * 1024 * 1024; x *= 4)
    rows.push_back(
        {{"op", "all_reduce"}, {"size", x}, {"median_us", 0.001 * x}, {"time_us", 0.001 * x}});
  rows.push_back({{"op", "broadcast"}, {"size", 1024}, {"median_us", 999.0}});
  json bench = {{"schema", "dlhost.comm-bench/1"}, {"world_size", 2}, {"results", rows}};

  Options o;
  o.results = {write("profile.jsonl", profile.dump() + "\n")};
  o.compare = {write("measured.jsonl", measured.dump() + "\n")};
  o.comm_benches = {write("bench.json", bench.dump())};
  o.ranks = {2, 4};
  o.bucket_mb = 1.0;
  Report r = run_projection(o);
  json out = json::parse(r.json);
  ASSERT_EQ(out["projections"].size(), 2u);
  // The first case of LinkThatKeepsUp: 18 + 0.6144 ms with overlap.
  EXPECT_NEAR(out["projections"][0]["step_ms_overlap"].get<double>(), 18.6144, 1e-6);
  ASSERT_EQ(out["comparisons"].size(), 1u);
  EXPECT_NEAR(out["comparisons"][0]["projected_step_ms"].get<double>(), 18.6144, 1e-6);
  EXPECT_NEAR(out["comparisons"][0]["error_percent"].get<double>(), (18.6144 - 20.0) / 20.0 * 100,
              1e-6);
  EXPECT_NE(r.text.find("error -6.9%"), std::string::npos) << r.text;
  // A record without a profile, named: one clear error.
  json bare = profile;
  bare.erase("backward_profile");
  o.results = {write("bare.jsonl", bare.dump() + "\n")};
  o.case_id = "lenet-1";
  try {
    run_projection(o);
    ADD_FAILURE() << "a record without a profile cannot be projected";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("backward_profile"), std::string::npos) << e.what();
  }
  // One that ran the host's fused step (a backend may skip grad_ready then): the error says
  // which key gives the split step's profile.
  bare["timing"]["fused_step"] = true;
  o.results = {write("fused.jsonl", bare.dump() + "\n")};
  try {
    run_projection(o);
    ADD_FAILURE() << "a fused-step record cannot be projected";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("fused_step: off"), std::string::npos) << e.what();
  }
  for (const auto& f : {o.results[0], o.compare[0], o.comm_benches[0]}) std::filesystem::remove(f);
}

TEST(ProjectCommand, FitOverTheLinkPerWorldSize) {
  using json = nlohmann::json;
  json profile = lenet_profile_record();
  // comm-bench over 1gbe test hosts: 2 ranks 0.02 us/byte (2 x the wire's 0.008: a reduce then
  // a broadcast), 4 ranks 0.04 us/byte; both without latency.
  auto bench = [&](int world, double b) {
    json rows = json::array();
    for (double x = 16 * 1024; x <= 4.0 * 1024 * 1024; x *= 4)
      rows.push_back({{"op", "all_reduce"}, {"size", x}, {"median_us", b * x}});
    return json{{"schema", "dlhost.comm-bench/1"},
                {"world_size", world},
                {"config", {{"in_place", true}}},
                {"results", rows},
                {"interconnect", {{"profile", "1gbe"}, {"link_gbit", 1}}},
                {"status", "OK"}};
  };
  // The same case measured on 4 test hosts over 1gbe (compared), and over loopback (not: another
  // link).
  json measured = {{"schema_version", 1},
                   {"case_id", "lenet-4"},
                   {"status", "OK"},
                   {"params", {{"network", "lenet"}, {"backend", "cpu_onednn"}, {"batch", 128}}},
                   {"environment", {{"cores", 2}}},
                   {"interconnect", {{"profile", "1gbe"}}},
                   {"timing", {{"step", {{"median", 100.0}}}}},
                   {"distributed", {{"ranks", 4}, {"per_rank_batch", 32}, {"overlap", false}}}};
  json loopback = measured;
  loopback["case_id"] = "lenet-4-loopback";
  loopback.erase("interconnect");

  Options o;
  o.results = {write("profile2.jsonl", profile.dump() + "\n")};
  o.compare = {write("measured2.jsonl", measured.dump() + "\n" + loopback.dump() + "\n")};
  o.comm_benches = {write("bench2.json", bench(2, 0.02).dump()),
                    write("bench4.json", bench(4, 0.04).dump())};
  o.ranks = {2, 4, 8};
  o.interconnect = "1gbe";
  o.bucket_mb = 25;
  Report r = run_projection(o);
  json out = json::parse(r.json);
  ASSERT_EQ(out["links"].size(), 3u);
  EXPECT_EQ(out["links"][0]["source"], "as measured on 2 ranks over 1gbe test hosts");
  EXPECT_EQ(out["links"][1]["source"], "as measured on 4 ranks over 1gbe test hosts");
  EXPECT_NE(
      out["links"][2]["source"].get<std::string>().find("scaled from 4 to 8 ranks by the ring"),
      std::string::npos)
      << out["links"][2];
  // 1700 KiB in one bucket, no overlap: 2 ranks 0.02 us/byte x bytes, as measured (no nominal
  // latency, no wire beta added).
  const double bytes = 1700.0 * 1024;
  EXPECT_NEAR(out["projections"][0]["comm_ms"].get<double>(), 0.02 * bytes / 1000, 1e-9);
  EXPECT_NEAR(out["projections"][1]["comm_ms"].get<double>(), 0.04 * bytes / 1000, 1e-9);
  // Only the 1gbe record is compared, marked oversubscribed (4 ranks on 2 cores).
  ASSERT_EQ(out["comparisons"].size(), 1u);
  EXPECT_EQ(out["comparisons"][0]["measured_case"], "lenet-4");
  EXPECT_TRUE(out["comparisons"][0]["oversubscribed"].get<bool>());
  EXPECT_NEAR(out["comparisons"][0]["projected_step_ms"].get<double>(), 18 + 0.04 * bytes / 1000,
              1e-9);
  EXPECT_NE(r.text.find("oversubscribed: 4 threads on 2 cores"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("1gbe test hosts, in place"), std::string::npos) << r.text;
  // Over another link, the 1gbe fits are nominal figures' floor, and say so.
  o.interconnect = "10gbe";
  json ten = json::parse(run_projection(o).json);
  EXPECT_NE(ten["links"][0]["source"].get<std::string>().find("nominal 10gbe over the fit"),
            std::string::npos)
      << ten["links"][0];
  EXPECT_EQ(ten["comparisons"].size(), 0u);
  // Two files of one world size: one clear error.
  o.comm_benches.push_back(o.comm_benches[0]);
  EXPECT_THROW(run_projection(o), std::invalid_argument);
  for (const auto& f : {o.results[0], o.compare[0], o.comm_benches[0], o.comm_benches[1]})
    std::filesystem::remove(f);
}

// --link-gbit / --link-latency-us as comm-bench and the suite keys name them; the first names
// stay accepted as the same options. The defaults come from the key table.
TEST(ProjectCommand, LinkOptionsAndTheirOldNames) {
  CLI::App app;
  dlhost::Command c = add_command(app);
  ASSERT_NE(c.sub, nullptr);
  EXPECT_TRUE(c.run_without_plugins);
  EXPECT_EQ(c.sub->get_option("--link-gbit"), c.sub->get_option("--bandwidth-gbit"));
  EXPECT_EQ(c.sub->get_option("--link-latency-us"), c.sub->get_option("--latency-us"));
  EXPECT_EQ(c.sub->get_option("--interconnect")->get_default_str(), "loopback");
  EXPECT_EQ(c.sub->get_option("--bucket-mb")->get_default_str(), "25");
  const Options o;
  EXPECT_EQ(o.interconnect, "loopback");
  EXPECT_EQ(o.bucket_mb, 25);
}

// Which tool runtimes project models (runtime_model.h): torch_ddp as DDP's buckets through Gloo;
// each other pattern one line of why not.
TEST(RuntimeModel, AllReduceModelledOtherPatternsSaid) {
  const RuntimeModel ddp = runtime_model("torch_ddp", "sync", 0);
  EXPECT_EQ(ddp.not_modelled, "");
  EXPECT_EQ(ddp.collective, "gloo");
  EXPECT_EQ(ddp.first_bucket_mb, 1);
  EXPECT_EQ(ddp.bucket_mb, 25);  // none recorded: DDP's default
  EXPECT_EQ(runtime_model("torch_ddp", "sync", 4).bucket_mb, 4);
  EXPECT_NE(runtime_model("mxnet_kvstore", "sync", 0).not_modelled.find("parameter server"),
            std::string::npos);
  EXPECT_NE(runtime_model("tf_ps", "async", 0).not_modelled.find("parameter server"),
            std::string::npos);
  EXPECT_NE(runtime_model("torch_ddp", "async", 0).not_modelled.find("asynchronously"),
            std::string::npos);
  EXPECT_NE(runtime_model("tf_collective", "sync", 0).not_modelled.find("no fit"),
            std::string::npos);
  EXPECT_NE(runtime_model("bigdl_spark", "sync", 0).not_modelled.find("no grad-ready profile"),
            std::string::npos);
  EXPECT_NE(runtime_model("horovod", "sync", 0).not_modelled.find("runtime 'horovod'"),
            std::string::npos);
}

// A tool's own runtime among the measured records (issue 41): torch_ddp is projected as DDP's
// buckets (the first 1 MiB, then its bucket_mb) at the cost of a gloo fit, never as dlhost's
// buckets and never with an exposed time it does not have; a parameter server, a runtime
// without a profile of its tool and a fit of another comm each get one line saying why not.
TEST(ProjectCommand, ToolRuntimesProjectedOrSaidWhyNot) {
  using json = nlohmann::json;
  json profile = lenet_profile_record();
  profile["params"]["backend"] = "cpu_libtorch2";
  auto measured = [](const std::string& id, const std::string& network, const std::string& runtime,
                     const std::string& mode) {
    json d = {{"ranks", 2},         {"per_rank_batch", 32}, {"comm", runtime},
              {"runtime", runtime}, {"mode", mode},         {"bucket_mb", 25}};
    if (runtime == "torch_ddp") {
      d["comm_time"] = "a comm hook's span";
      d["allreduce"] = {{"median", 3.0}};
    } else {
      d["comm_time_absent"] = "push and pull wait inside the session";
    }
    return json{{"schema_version", 1},
                {"case_id", id},
                {"status", "OK"},
                {"params", {{"network", network}, {"backend", "cpu_libtorch2"}, {"batch", 64}}},
                {"timing", {{"step", {{"median", 20.0}}}}},
                {"distributed", d}};
  };
  const std::string runs = measured("lenet-ddp-2", "lenet", "torch_ddp", "sync").dump() + "\n" +
                           measured("lenet-ps-2", "lenet", "tf_ps", "async").dump() + "\n" +
                           measured("fcnr-ddp-2", "fcnr", "torch_ddp", "sync").dump() + "\n";
  // comm-bench of gloo on 2 ranks: time = 0.001 us/byte x size.
  auto bench = [](const std::string& comm) {
    json rows = json::array();
    for (double x = 1024; x <= 4.0 * 1024 * 1024; x *= 4)
      rows.push_back({{"op", "all_reduce"}, {"size", x}, {"median_us", 0.001 * x}});
    return json{{"schema", "dlhost.comm-bench/1"},
                {"world_size", 2},
                {"plugin", {{"name", comm}}},
                {"results", rows}};
  };
  Options o;
  o.results = {write("ddp_profile.jsonl", profile.dump() + "\n")};
  o.compare = {write("ddp_measured.jsonl", runs)};
  const std::string gloo_file = write("ddp_gloo.json", bench("gloo").dump());
  o.comm_benches = {gloo_file};
  o.ranks = {2};
  o.bucket_mb = 1.0;  // dlhost's buckets: 3 of them, 18.6144 ms (FilesToTableAndError)
  Report r = run_projection(o);
  json out = json::parse(r.json);
  ASSERT_EQ(out["comparisons"].size(), 1u) << r.text;
  const json& ddp = out["comparisons"][0];
  EXPECT_EQ(ddp["measured_case"], "lenet-ddp-2");
  EXPECT_EQ(ddp["runtime"], "torch_ddp");
  // DDP's buckets: {3, 2} (500 KiB, the first, under 1 MiB) ready at 2 ms, then {1, 0} (1200
  // KiB, under 25) ready at 6 ms, the end of backward: 1.2288 ms exposed; 18 + 1.2288 ms.
  EXPECT_NEAR(ddp["projected_step_ms"].get<double>(), 19.2288, 1e-6);
  EXPECT_TRUE(ddp["measured_exposed_ms"].is_null()) << ddp;  // none recorded: not a 0
  EXPECT_EQ(ddp["runtime_comm_ms"].get<double>(), 3.0);
  EXPECT_NE(r.text.find("lenet-ddp-2 (torch_ddp)"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("torch_ddp's own comm time 3.00 ms"), std::string::npos) << r.text;
  ASSERT_EQ(out["not_projected"].size(), 2u) << r.text;
  EXPECT_EQ(out["not_projected"][0]["measured_case"], "lenet-ps-2");
  EXPECT_NE(r.text.find("not projected: lenet-ps-2 (tf_ps): a parameter server's push and pull"),
            std::string::npos)
      << r.text;
  EXPECT_NE(r.text.find("not projected: fcnr-ddp-2 (torch_ddp): no 1-rank record of "
                        "cpu_libtorch2 on fcnr at batch 32 with a backward_profile"),
            std::string::npos)
      << r.text;
  // A fit of another comm is not torch_ddp's collective: said, not used.
  o.comm_benches = {write("ddp_mpi.json", bench("mpi").dump())};
  r = run_projection(o);
  out = json::parse(r.json);
  EXPECT_EQ(out["comparisons"].size(), 0u) << r.text;
  EXPECT_NE(r.text.find("not projected: lenet-ddp-2 (torch_ddp): torch_ddp all-reduces through "
                        "gloo, and the fit for 2 ranks"),
            std::string::npos)
      << r.text;
  EXPECT_NE(r.text.find("is of comm mpi: give a comm-bench --json file of gloo"), std::string::npos)
      << r.text;
  for (const auto& f : {o.results[0], o.compare[0], o.comm_benches[0], gloo_file})
    std::filesystem::remove(f);
}

}  // namespace
