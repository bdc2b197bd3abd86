// test_case_names.cpp — suite/case_names: a case's display name is made of the keys that vary
// within its group (its suite's matrix part, a report group), with the id's head on the console;
// names stay unique over the whole suite; keys that vary are listed with their values.
#include <gtest/gtest.h>

#include "suite/case_names.h"

namespace dlhost {
namespace {

using json = nlohmann::ordered_json;

// A case of paper_repro's CPU rows as the suite loader fills it: every key with its default.
json cpu_case(const std::string& network, const std::string& backend, int batch, int threads) {
  return json{{"network", network},   {"backend", backend},   {"batch", batch},
              {"threads", threads},   {"comm", "none"},       {"ranks", 1},
              {"launcher", "mpirun"}, {"comm_memory", "auto"}};
}

// What the issue saw: "fcn5.cpu_onednn.b64.t1.comm=none.ranks=1.launcher=mpirun.comm_memory=auto"
// because a GPU row of the same suite has ranks and a comm.
TEST(case_names, TheConsoleNamesTheIdHeadAndWhatVariesInTheMatrixPart) {
  json gpu = cpu_case("fcnr", "gpu_cudnn", 4096, 0);
  gpu["comm"] = "nccl";
  gpu["launcher"] = "local";
  json gpu2 = gpu;
  gpu2["ranks"] = 2;
  std::vector<NamedCase> cases = {
      {"fcn5.cpu_onednn.b64.t1.comm=none.ranks=1.launcher=mpirun.comm_memory=auto",
       cpu_case("fcn5", "cpu_onednn", 64, 1), "paper.yaml:31"},
      {"fcn5.cpu_tensorflow.b64.t2.comm=none.ranks=1.launcher=mpirun.comm_memory=auto",
       cpu_case("fcn5", "cpu_tensorflow", 64, 2), "paper.yaml:31"},
      {"fcnr.gpu_cudnn.b4096.t0.comm=nccl.ranks=1.launcher=local.comm_memory=auto", gpu,
       "paper.yaml:60"},
      {"fcnr.gpu_cudnn.b4096.t0.comm=nccl.ranks=2.launcher=local.comm_memory=auto", gpu2,
       "paper.yaml:60"},
  };
  EXPECT_EQ(short_case_names(cases, console_name_options()),
            (std::vector<std::string>{"fcn5.cpu_onednn.b64.t1", "fcn5.cpu_tensorflow.b64.t2",
                                      "fcnr.gpu_cudnn.b4096.t0.ranks=1",
                                      "fcnr.gpu_cudnn.b4096.t0.ranks=2"}));
}

// Plot labels: within a group only what varies there, a plugin's option by its own name.
TEST(case_names, AReportGroupNamesOnlyWhatVariesInIt) {
  json tf = cpu_case("lenet", "cpu_tensorflow", 16, 1);
  json xla = tf;
  xla["options"] = {{"cpu_tensorflow", {{"mode", "xla"}}}};
  json onednn = cpu_case("lenet", "cpu_onednn", 16, 1);
  json bf16 = onednn;
  bf16["precision"] = "bf16";
  std::vector<NamedCase> cases = {{"a", tf, "lenet t1"},
                                  {"b", xla, "lenet t1"},
                                  {"c", onednn, "lenet t1"},
                                  {"d", bf16, "lenet t1"}};
  EXPECT_EQ(short_case_names(cases),
            (std::vector<std::string>{"cpu_tensorflow", "cpu_tensorflow.cpu_tensorflow.mode=xla",
                                      "cpu_onednn", "cpu_onednn.precision=bf16"}));
}

// paper_repro's real-data rows name the same network, backend, batch and threads as its
// synthetic rows, from another matrix part: the key that tells them apart is added to both.
TEST(case_names, NamesStayUniqueAcrossMatrixParts) {
  json synthetic = cpu_case("fcnr", "cpu_onednn", 1024, 1);
  synthetic["data"] = "synthetic";
  json real = synthetic;
  real["data"] = "real";
  json other = cpu_case("fcnr", "cpu_tensorflow", 1024, 1);
  other["data"] = "synthetic";
  std::vector<NamedCase> cases = {{"fcnr.cpu_onednn.b1024.t1", synthetic, "s:1"},
                                  {"fcnr.cpu_tensorflow.b1024.t1", other, "s:1"},
                                  {"fcnr.cpu_onednn.b1024.t1.data=real", real, "s:2"}};
  EXPECT_EQ(short_case_names(cases, console_name_options()),
            (std::vector<std::string>{"fcnr.cpu_onednn.b1024.t1.data=synthetic",
                                      "fcnr.cpu_tensorflow.b1024.t1",
                                      "fcnr.cpu_onednn.b1024.t1.data=real"}));
  // Without the rule, within each part alone, the two would read the same.
  ShortNameOptions per_part = console_name_options();
  per_part.unique_overall = false;
  const auto loose = short_case_names(cases, per_part);
  EXPECT_EQ(loose[0], loose[2]);
}

// Cases listed one by one (each its own part): the one key that tells all of them apart, not
// every key that differs somewhere.
TEST(case_names, TheKeyThatTellsMostApartIsAddedAlone) {
  json ok = cpu_case("lenet", "faulty", 4, 1);
  ok["tags"] = {"ok"};
  json failed = ok;
  failed["tags"] = {"failed"};
  failed["options"] = {{"faulty", {{"fault", "error"}}}};
  json ranks = ok;
  ranks["tags"] = {"ranks"};
  ranks["comm"] = "store_check";
  ranks["ranks"] = 2;
  ranks["launcher"] = "local";
  std::vector<NamedCase> cases = {{"1", ok, "s:3"}, {"2", failed, "s:4"}, {"3", ranks, "s:5"}};
  EXPECT_EQ(
      short_case_names(cases, console_name_options()),
      (std::vector<std::string>{"lenet.faulty.b4.t1.tags=ok", "lenet.faulty.b4.t1.tags=failed",
                                "lenet.faulty.b4.t1.tags=ranks"}));
}

TEST(case_names, NothingToNameFallsBackToTheId) {
  std::vector<NamedCase> one = {
      {"lenet.cpu_onednn.b16.t1", cpu_case("lenet", "cpu_onednn", 16, 1), "g"}};
  EXPECT_EQ(short_case_names(one), std::vector<std::string>{"lenet.cpu_onednn.b16.t1"});
  // Two records of one case (rounds, --resume): one name, no clash.
  std::vector<NamedCase> twice = {one[0], one[0]};
  twice[1].group = "h";
  const auto names = short_case_names(twice, console_name_options());
  EXPECT_EQ(names[0], "lenet.cpu_onednn.b16.t1");
  EXPECT_EQ(names[1], "lenet.cpu_onednn.b16.t1");
}

TEST(case_names, VaryingKeysListTheirValuesInOrder) {
  json a = cpu_case("fcn5", "cpu_onednn", 64, 4);
  json b = cpu_case("fcn8", "cpu_onednn", 64, 8);
  json c = cpu_case("fcn5", "cpu_onednn", 64, 16);
  c["options"] = {{"cpu_onednn", {{"fused_step", true}}}};
  const auto keys = varying_keys({a, b, c});
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].key, "network");
  EXPECT_EQ(keys[0].values, (std::vector<std::string>{"fcn5", "fcn8"}));
  EXPECT_EQ(keys[1].key, "threads");
  EXPECT_EQ(keys[1].values, (std::vector<std::string>{"4", "8", "16"}));
  EXPECT_EQ(keys[2].key, "cpu_onednn.fused_step");
  EXPECT_EQ(keys[2].values, (std::vector<std::string>{"(unset)", "true"}));
}

}  // namespace
}  // namespace dlhost
