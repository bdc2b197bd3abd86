// test_run_console.cpp — what `dlhost run` prints: the phase and time texts, the ETA, the live
// line fitted to the terminal, and the console itself on a pseudo-terminal (an updating line),
// on a pipe (plain lines) and with --quiet (the summary only).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "console/run_console.h"

namespace dlhost {
namespace {

TEST(RunConsole, PhaseText) {
  EXPECT_EQ(phase_text({}, 2, 10), "preparing");
  EXPECT_EQ(phase_text({true, 0, 0}, 2, 10), "warm-up 1/2 forward");
  EXPECT_EQ(phase_text({true, 1, 3}, 2, 10), "warm-up 2/2 update");
  EXPECT_EQ(phase_text({true, 2, 1}, 2, 10), "timed step 1/10 backward");
  EXPECT_EQ(phase_text({true, 11, 2}, 2, 10), "timed step 10/10 all-reduce");
  EXPECT_EQ(phase_text({true, 0, 0}, 0, 3), "timed step 1/3 forward");
}

TEST(RunConsole, ClockText) {
  EXPECT_EQ(clock_text(0), "0:00");
  EXPECT_EQ(clock_text(7.4), "0:07");
  EXPECT_EQ(clock_text(725), "12:05");
  EXPECT_EQ(clock_text(3723), "1:02:03");
  EXPECT_EQ(clock_text(-3), "0:00");
}

TEST(RunConsole, EtaFromTheCasesDone) {
  EXPECT_FALSE(eta_seconds({}, 3, 1.0).has_value());     // nothing done: no basis
  EXPECT_DOUBLE_EQ(*eta_seconds({10, 20}, 3, 5), 40.0);  // mean 15 x 3 left - 5 elapsed
  EXPECT_DOUBLE_EQ(*eta_seconds({10}, 1, 25), 0.0);      // running late: never negative
  EXPECT_DOUBLE_EQ(*eta_seconds({}, 0, 0), 0.0);         // nothing left to run
}

TEST(RunConsole, LiveLineFitsTheTerminal) {
  LiveStatus s{3, 12, "lenet.cpu_onednn.b64.t2", "timed step 4/10 backward", 12, 151, 310};
  EXPECT_EQ(live_line(s, 200),
            "[ 3/12] lenet.cpu_onednn.b64.t2  timed step 4/10 backward  case 0:12  run 2:31  "
            "ETA 5:10");
  s.eta_s.reset();
  s.case_id = std::string(300, 'n');
  std::string line = live_line(s, 100);
  EXPECT_EQ(line.size(), 99u);  // one column short: a full line wraps on some terminals
  EXPECT_NE(line.find("n~  timed step 4/10 backward  case 0:12  run 2:31  ETA --"),
            std::string::npos)
      << line;
  EXPECT_LE(live_line(s, 20).size(), 19u);
}

// Everything readable from `fd` until `needle` shows up (or 10 s pass: a failure, not a timing).
std::string read_until(int fd, const std::string& needle, std::string& seen) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen.find(needle) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) seen.append(buf, static_cast<size_t>(n));
  }
  return seen;
}

std::vector<PlannedCase> two_cases() { return {{"lenet.a", 2, 5, true}, {"fcnr.b", 1, 3, true}}; }

TEST(RunConsole, UpdatingLineOnAPseudoTerminal) {
  int master = -1, slave = -1;
  winsize size{};
  size.ws_col = 120;
  size.ws_row = 24;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, &size), 0);
  setenv("TERM", "xterm", 1);
  ASSERT_EQ(console_mode(slave, false), ConsoleMode::live);
  ASSERT_EQ(console_mode(slave, true), ConsoleMode::quiet);
  ProgressChannel channel;
  std::string seen;
  {
    RunConsole console(ConsoleMode::live, slave, &channel, 0.02);
    console.plan(two_cases());
    console.case_started(0);
    read_until(master, "preparing", seen);
    EXPECT_NE(seen.find("\r\033[K[1/2] lenet.a  preparing  case 0:00"), std::string::npos) << seen;
    channel.publish(3, 1);  // warm-up 2: the second timed step, in backward
    read_until(master, "timed step 2/5 backward", seen);
    EXPECT_NE(seen.find("timed step 2/5 backward"), std::string::npos) << seen;
    EXPECT_NE(seen.find("ETA --"), std::string::npos) << "no case done: no ETA yet";
    console.case_finished("[1/2] lenet.a OK", {"warning [spread]: wide"});
    read_until(master, "wide", seen);
    // The live line is erased before the finished line is written over it.
    EXPECT_NE(seen.find("\r\033[K[1/2] lenet.a OK\r\n    warning [spread]: wide\r\n"),
              std::string::npos)
        << seen;
    channel.reset();
    console.case_started(1);
    read_until(master, "[2/2] fcnr.b  preparing", seen);
    EXPECT_EQ(seen.find("ETA --", seen.find("[2/2] fcnr.b")), std::string::npos)
        << "a case is done: an ETA is shown";
    console.summary("done: 2 OK");
    read_until(master, "done: 2 OK", seen);
  }
  EXPECT_NE(seen.find("\r\033[Kdone: 2 OK\r\n"), std::string::npos) << seen;
  close(slave);
  close(master);
}

std::string run_on_a_pipe(ConsoleMode mode) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  EXPECT_EQ(console_mode(fds[1], false), ConsoleMode::plain);
  {
    RunConsole console(mode, fds[1], nullptr, 0.02);
    console.note("dlhost header");
    console.plan(two_cases());
    console.case_started(0);
    console.case_finished("[1/2] lenet.a OK", {"warning [spread]: wide"});
    console.case_started(1);
    console.case_finished("[2/2] fcnr.b OK", {});
    console.summary("done: 2 OK");
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}

TEST(RunConsole, PlainLinesWhenNotATerminal) {
  EXPECT_EQ(run_on_a_pipe(ConsoleMode::plain),
            "dlhost header\n[1/2] lenet.a OK\n    warning [spread]: wide\n[2/2] fcnr.b OK\n"
            "done: 2 OK\n");
}

TEST(RunConsole, QuietPrintsOnlyTheSummary) {
  EXPECT_EQ(run_on_a_pipe(ConsoleMode::quiet), "done: 2 OK\n");
}

}  // namespace
}  // namespace dlhost
