// test_tokens_and_peak.cpp — what a record says for model FLOP utilisation (issue 33): a language
// model's tokens per sample and tokens/s, and the `matmul_peak` key's block, from real cases run
// in this process on cpu_reference; a network without token ids and a case without the key have
// none of them; a peak slower than what is left of the case's time (the fixture backend `faulty`,
// sleeping in every forward) stops there, with the case's timing kept. And a case key of the
// wrong type (params not from the loader) fails the case naming the key and the case's line.
#include <gtest/gtest.h>

#include <string>

#include "core/networks.h"
#include "core/plugin_registry.h"
#include "run/runner.h"

namespace {

using json = nlohmann::ordered_json;

const dlhost::PluginRegistry& registry() {
  static const dlhost::PluginRegistry* r = [] {
    auto* made = new dlhost::PluginRegistry();  // plugins are never unloaded
    made->discover({DLHOST_TEST_PLUGIN_DIR, DLHOST_TEST_BINARY_DIR "/tests/fixture_backends"});
    return made;
  }();
  return *r;
}

json run(const json& params, const std::string& source = "") {
  static const auto networks = dlhost::list_networks(registry());
  dlhost::RunContext ctx;
  ctx.registry = &registry();
  ctx.networks = &networks;
  dlhost::CaseSpec spec;
  spec.id = "tokens";
  spec.params = params;
  spec.source = source;
  return dlhost::run_case(spec, ctx);
}

TEST(TokensAndPeak, ALanguageModelHasTokensPerSecondAndTheKeyAMatmulPeak) {
  json rec = run(json{{"network", "gpt2_tiny"},
                      {"backend", "cpu_reference"},
                      {"batch", 2},
                      {"iterations", 2},
                      {"warmup", 0},
                      {"threads", 1},
                      {"matmul_peak", 96}});
  ASSERT_EQ(rec["status"], "OK") << rec["reason"];
  // The sequence length, as the input shape says it ("T ids").
  const std::string shape = rec["network"]["input_shape"];
  ASSERT_NE(shape.find(" ids"), std::string::npos) << shape;
  const int64_t tokens = std::stoll(shape);
  EXPECT_EQ(rec["network"]["tokens_per_sample"], tokens);
  EXPECT_NEAR(rec["timing"]["tokens_per_second"].get<double>(),
              rec["timing"]["samples_per_second"].get<double>() * static_cast<double>(tokens),
              1e-6 * rec["timing"]["tokens_per_second"].get<double>());

  const json& peak = rec["matmul_peak"];
  EXPECT_EQ(peak["m"], 96);
  EXPECT_EQ(peak["n"], 96);
  EXPECT_EQ(peak["k"], 96);
  EXPECT_EQ(peak["pass"], "forward");
  EXPECT_EQ(peak["iterations"], 10);
  EXPECT_DOUBLE_EQ(peak["gemm_flops"].get<double>(), 2.0 * 96 * 96 * 96);
  ASSERT_GT(peak["median_ms"].get<double>(), 0.0);
  EXPECT_NEAR(peak["gflops"].get<double>(),
              peak["gemm_flops"].get<double>() / peak["median_ms"].get<double>() / 1e6,
              1e-9 * peak["gflops"].get<double>());
}

TEST(TokensAndPeak, AnImageNetworkWithoutTheKeyHasNeither) {
  json rec = run(json{{"network", "lenet"},
                      {"backend", "cpu_reference"},
                      {"batch", 2},
                      {"iterations", 1},
                      {"warmup", 0},
                      {"threads", 1}});
  ASSERT_EQ(rec["status"], "OK") << rec["reason"];
  EXPECT_FALSE(rec["network"].contains("tokens_per_sample"));
  EXPECT_FALSE(rec["timing"].contains("tokens_per_second"));
  EXPECT_FALSE(rec.contains("matmul_peak"));
}

// `matmul_peak: 4096, timeout: 4` on LeNet: steps of 2 ms done, then the peak ran with no deadline
// and the case was killed as TIMEOUT with `timing: null` (issue 43). Each forward here sleeps
// 500 ms: one timed step, then the peak's passes until the next would end past the 3 s timeout
// (13 passes, 6.5 s, without the deadline).
TEST(TokensAndPeak, APeakThatRunsOutOfTheCasesTimeKeepsTheTimingAndSaysSo) {
  json rec = run(json{{"network", "lenet"},
                      {"backend", "faulty"},
                      {"batch", 2},
                      {"iterations", 1},
                      {"warmup", 0},
                      {"timeout", 3},
                      {"matmul_peak", 64},
                      {"options", {{"faulty", {{"fault", "slow"}, {"slow_ms", 500}}}}}});
  ASSERT_EQ(rec["status"], "OK") << rec["reason"];
  ASSERT_TRUE(rec["timing"].is_object()) << rec.dump();
  EXPECT_EQ(rec["timing"]["iterations"], 1) << rec["timing"].dump();
  const json& peak = rec["matmul_peak"];
  ASSERT_TRUE(peak.contains("error")) << peak.dump();
  EXPECT_NE(peak["error"].get<std::string>().find(
                "matmul_peak: not measured, the case's time ran out before forward pass "),
            std::string::npos)
      << peak["error"];
  EXPECT_FALSE(peak.contains("gflops")) << peak.dump();
}

// The keys are typed once (suite/case_params.h): "8" for threads was a JSON type error, INTERNAL.
TEST(TokensAndPeak, AKeyOfTheWrongTypeFailsTheCaseNamingItsLine) {
  json rec = run(json{{"network", "lenet"}, {"backend", "cpu_reference"}, {"threads", "8"}},
                 "suite.yaml:12");
  EXPECT_EQ(rec["status"], "FAILED");
  EXPECT_EQ(rec["reason"],
            "INVALID_ARGUMENT: suite.yaml:12: 'threads' must be an integer, got \"8\"");
}

}  // namespace
