// test_case_process.cpp — isolate/case_process: the parent's reading of its case workers' stdout:
// marker lines, the pieces a rank killed mid-write leaves (which once leaked to the user's stderr
// as "@@DLH@@DLHOST_PROGRESS@@ 1 3 0" on SIGTERM of a 2-rank case), and a plugin's own prints;
// the libraries' output kept off the console apart from dlhost's own log (case_output.h);
// also the case's command under each launcher and what its keys say about its test hosts.
#include <gtest/gtest.h>

#include <algorithm>

#include "console/progress_channel.h"
#include "isolate/case_output.h"
#include "isolate/case_process.h"
#include "launch/launcher.h"

namespace dlhost {
namespace {

TEST(worker_output, WholeMarkerLinesAreMarkers) {
  EXPECT_EQ(marker_in("@@DLHOST_PROGRESS@@ 1 3 0"), "@@DLHOST_PROGRESS@@ 1 3 0");
}

TEST(worker_output, AMarkerAfterATornOneIsKept) {
  EXPECT_EQ(marker_in("@@DLH@@DLHOST_PROGRESS@@ 1 3 0"), "@@DLHOST_PROGRESS@@ 1 3 0");
  EXPECT_EQ(marker_in("@@DLHOST_PROG@@DLHOST_RECORD@@ {}"), "@@DLHOST_RECORD@@ {}");
}

TEST(worker_output, ATornMarkerAloneIsDropped) {
  EXPECT_EQ(marker_in("@@DLH"), "");
  EXPECT_EQ(marker_in("loss 2.3 @@DL"), "");
}

TEST(worker_output, APluginsOwnPrintIsNotAMarker) {
  EXPECT_EQ(marker_in("cudnn: using algorithm 3"), std::nullopt);
  EXPECT_EQ(marker_in("a@@b"), std::nullopt);
  EXPECT_EQ(marker_in(""), std::nullopt);
}

// The libraries' own output (stderr, a plugin's prints on stdout) stays off the console and in the
// tail; dlhost's own log lines (tagged on stdout) reach the console and the tail alike, even when
// a library left half a line before one.
TEST(case_output, TheLibrariesOutputStaysInTheTailDlhostsLogReachesTheConsole) {
  std::vector<std::string> shown;
  CaseOutput out([&](const std::string& line) { shown.push_back(line); }, false);
  const std::string guard = "I tensorflow/core/platform/cpu_feature_guard.cc:210] This binary\n";
  out.on_stderr(guard.data(), guard.size());
  const std::string mixed = std::string("MXNet engine: ") + kLogMarker +
                            "[10:00:00.000] [warning] [faulty] low memory\n" + kStageMarker +
                            "1 ready\nplugin print\n";
  out.on_stdout(mixed.data(), mixed.size());
  out.finish();
  EXPECT_EQ(shown, std::vector<std::string>{"[10:00:00.000] [warning] [faulty] low memory"});
  EXPECT_NE(out.tail().find("cpu_feature_guard.cc:210] This binary\n"), std::string::npos);
  EXPECT_NE(out.tail().find("MXNet engine: \n"), std::string::npos);
  EXPECT_NE(out.tail().find("[warning] [faulty] low memory\n"), std::string::npos);
  EXPECT_NE(out.tail().find("plugin print\n"), std::string::npos);
  EXPECT_EQ(out.tail().find("@@DLHOST_"), std::string::npos);
  EXPECT_EQ(out.reports.stages.at(1), "ready");
}

// -v: the libraries' lines too, whole, as they end; a last line without its newline at the end.
TEST(case_output, ShownLiveWhenAskedLineByLine) {
  std::vector<std::string> shown;
  CaseOutput out([&](const std::string& line) { shown.push_back(line); }, true);
  out.on_stderr("W cpu_fea", 9);
  EXPECT_TRUE(shown.empty());
  const std::string rest = "ture_guard\nlast";
  out.on_stderr(rest.data(), rest.size());
  const std::string print = "stdout print\n";
  out.on_stdout(print.data(), print.size());
  out.finish();
  EXPECT_EQ(shown, (std::vector<std::string>{"W cpu_feature_guard", "stdout print", "last"}));
}

TEST(case_output, TheTailIsBounded) {
  CaseOutput out([](const std::string&) {}, false);
  const std::string line(100, 'x');
  const std::string text = line + "\n";
  for (int i = 0; i < 1000; ++i) out.on_stderr(text.data(), text.size());
  EXPECT_LE(out.tail().size(), 2 * kStderrTailBytes);
  EXPECT_GE(out.tail().size(), kStderrTailBytes);
}

using json = nlohmann::ordered_json;

TEST(case_job, InterconnectAndHostsFromTheKeys) {
  EXPECT_EQ(case_interconnect(case_params(json{{"ranks", 2}})).profile, "loopback");
  EXPECT_EQ(case_interconnect(case_params(json{{"interconnect", "10gbe"}})).gbit, 10);
  const Interconnect custom = case_interconnect(
      case_params(json{{"interconnect", "custom"}, {"link_gbit", 0.25}, {"link_latency_us", 40}}));
  EXPECT_EQ(custom.gbit, 0.25);
  EXPECT_EQ(custom.latency_us, 40);
  EXPECT_EQ(test_host_count(case_params(json{{"ranks", 4}})), 4);
  EXPECT_EQ(test_host_count(case_params(json{{"ranks", 5}, {"ranks_per_node", 2}})), 3);
}

// The launcher passes the run's progress channel on to every rank under the name the channel reads.
TEST(case_command, ForwardsTheProgressChannel) {
  const auto& vars = forwarded_variables();
  EXPECT_NE(std::find(vars.begin(), vars.end(), kProgressVariable), vars.end());
}

CaseJob job_of(json params) {
  CaseJob job;
  job.input.id = "c";
  job.input.params = std::move(params);
  return job;
}

TEST(case_command, OneRankIsTheWorkerAlone) {
  const auto cmd = case_command("/bin/dlhost", job_of(json{{"ranks", 1}}), CaseLimits{}, 8);
  ASSERT_EQ(cmd.size(), 3u);
  EXPECT_EQ(cmd[0], "/bin/dlhost");
  EXPECT_EQ(cmd[1], "case-worker");
}

TEST(case_command, MpirunWithTheStoreTheOversubscribeKeyAndBothArgLists) {
  CaseLimits limits;
  limits.launcher_args = {"--cli"};
  const auto cmd = case_command("/bin/dlhost",
                                job_of(json{{"ranks", 2},
                                            {"launcher", "mpirun"},
                                            {"threads", 1},
                                            {"oversubscribe", true},
                                            {"launcher_args", {"--suite"}}}),
                                limits, 64);
  const std::string all = [&] {
    std::string s;
    for (const auto& a : cmd) s += a + " ";
    return s;
  }();
  EXPECT_EQ(cmd[0], "mpirun");
  EXPECT_NE(all.find("--oversubscribe"), std::string::npos) << all;
  EXPECT_NE(all.find("-x DLHOST_STORE"), std::string::npos) << all;
  EXPECT_NE(all.find("--suite --cli /bin/dlhost case-worker"), std::string::npos) << all;
}

TEST(case_command, LocalIsDlhostsOwnLauncher) {
  const auto cmd = case_command("/bin/dlhost", job_of(json{{"ranks", 3}, {"launcher", "local"}}),
                                CaseLimits{}, 8);
  ASSERT_GE(cmd.size(), 3u);
  EXPECT_EQ(cmd[1], "case-local");
  EXPECT_EQ(cmd[2], "3");
}

}  // namespace
}  // namespace dlhost
