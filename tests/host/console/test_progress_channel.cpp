// test_progress_channel.cpp — the shared-memory word a case's rank 0 reports its steps through:
// the encoding, a publisher attached from DLHOST_PROGRESS in another process (as a case worker
// is), and the refusals (another rank, a wrong token, a file that is not the channel).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "console/progress_channel.h"
#include "run/runner.h"

namespace dlhost {
namespace {

TEST(ProgressChannel, EncodingKeepsStepAndPhase) {
  EXPECT_FALSE(decode_progress(0).started);
  for (int64_t step : {0, 1, 7, 123456789}) {
    for (int phase = 0; phase < 4; ++phase) {
      ProgressPoint p = decode_progress(encode_progress(step, phase));
      EXPECT_TRUE(p.started);
      EXPECT_EQ(p.step, step);
      EXPECT_EQ(p.phase, phase);
    }
  }
}

TEST(ProgressChannel, PublishReadReset) {
  ProgressChannel channel;
  EXPECT_FALSE(channel.read().started);
  channel.publish(4, 2);
  EXPECT_EQ(channel.read().step, 4);
  EXPECT_EQ(channel.read().phase, 2);
  channel.reset();
  EXPECT_FALSE(channel.read().started);
}

// What a case worker does: attach from the environment, then the step loop calls on_progress.
int child_publishes(int rank, int64_t step, int phase) {
  pid_t pid = fork();
  if (pid == 0) {
    RunContext ctx;
    ctx.rank.rank = rank;
    int earlier = 0;
    ctx.on_progress = [&earlier](int64_t, int) { ++earlier; };
    attach_progress_publisher(ctx);
    if (ctx.on_progress) ctx.on_progress(step, phase);
    _exit(earlier == 1 ? 0 : 3);  // the callback already there still runs
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ProgressChannel, Rank0OfAnotherProcessPublishes) {
  ProgressChannel channel;
  setenv(kProgressVariable, channel.address().c_str(), 1);
  ASSERT_EQ(child_publishes(0, 12, 1), 0);
  EXPECT_TRUE(channel.read().started);
  EXPECT_EQ(channel.read().step, 12);
  EXPECT_EQ(channel.read().phase, 1);
  unsetenv(kProgressVariable);
}

TEST(ProgressChannel, OtherRanksDoNotPublish) {
  ProgressChannel channel;
  setenv(kProgressVariable, channel.address().c_str(), 1);
  ASSERT_EQ(child_publishes(1, 12, 1), 0);
  EXPECT_FALSE(channel.read().started);
  unsetenv(kProgressVariable);
}

TEST(ProgressChannel, WrongTokenOrFileIsNeverWritten) {
  ProgressChannel channel;
  std::string address = channel.address();
  std::string path = address.substr(0, address.find(' '));
  setenv(kProgressVariable, (path + " 1234").c_str(), 1);
  ASSERT_EQ(child_publishes(0, 5, 0), 0);
  EXPECT_FALSE(channel.read().started);

  // A plain file at the named path (a rank on another node finds some other file there).
  std::string other = std::string(DLHOST_PROGRESS_TEST_OUT) + "/not_a_channel.txt";
  { std::ofstream(other) << std::string(4096, 'x'); }
  setenv(kProgressVariable, (other + " " + address.substr(address.find(' ') + 1)).c_str(), 1);
  ASSERT_EQ(child_publishes(0, 5, 0), 0);
  std::ifstream in(other);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, std::string(4096, 'x'));
  unsetenv(kProgressVariable);
}

}  // namespace
}  // namespace dlhost
