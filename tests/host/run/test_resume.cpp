// test_resume.cpp — tests of what a run trusts and keeps in its results file (issue 18): the
// writer's lock and its cut back to the last whole line when a write fails, --resume's refusal of
// another suite's records and of a case id under other parameters, its skipping of lines that
// are not records (with their numbers), and the command it prints to finish a run; (issue 32) its
// refusal of paths that are not regular files and a write that blocks giving way to a stop.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "record/results_file.h"
#include "run/results.h"
#include "run/resume.h"

namespace dlhost {
namespace {

std::string temp_path(const std::string& name) {
  std::string path = testing::TempDir() + "/test_resume_" + name;
  std::remove(path.c_str());
  return path;
}

std::string text_of(const std::string& path) {
  std::stringstream s;
  s << std::ifstream(path).rdbuf();
  return s.str();
}

nlohmann::ordered_json record(const std::string& suite, const std::string& id,
                              const std::string& hash) {
  return {{"schema_version", 1},
          {"case_id", id},
          {"status", "OK"},
          {"suite", {{"name", suite}}},
          {"params_hash", hash}};
}

// Two dlhost runs on one file interleaved their records.
TEST(results_writer, ASecondWriterIsRefused) {
  std::string path = temp_path("lock.jsonl");
  ResultsWriter first(path);
  try {
    ResultsWriter second(path);
    FAIL() << "a second writer opened the file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is being written by another dlhost run"),
              std::string::npos)
        << e.what();
  }
}

// A full disk left a torn line and the process aborted (terminate ... No space left on device).
TEST(results_writer, AFailedWriteLeavesOnlyWholeLines) {
  std::string path = temp_path("full.jsonl");
  ResultsWriter writer(path);
  writer.append(record("s", "a", "1"));
  const std::string before = text_of(path);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = before.size() + 10;  // room for 10 bytes of the next line, not all of it
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  EXPECT_THROW(writer.append(record("s", "b", "2")), std::runtime_error);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  EXPECT_EQ(text_of(path), before);
  writer.append(record("s", "b", "2"));  // with room again, the next record starts cleanly
  const record::ResultsLines back = record::read_results(path, record::BadLines::refuse);
  EXPECT_EQ(back.records.size(), 2u);
  EXPECT_TRUE(back.torn.empty());
}

std::string refusal(const std::string& path) {
  try {
    ResultsWriter writer(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// `-o res.fifo` blocked after 10 records and ignored SIGINT; `-o /proc/version` ran the whole
// case before its write failed.
TEST(results_writer, PathsThatAreNotRegularDataFilesAreRefusedNamingWhatTheyAre) {
  const std::string fifo = temp_path("results.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(refusal(fifo), "results file " + fifo +
                               ": not a regular file (a FIFO); results go to "
                               "a regular file");
  EXPECT_NE(refusal(testing::TempDir()).find("not a regular file (a directory)"),
            std::string::npos);
  EXPECT_NE(refusal("/dev/null").find("not a regular file (a device)"), std::string::npos);
  EXPECT_EQ(refusal("/proc/version"),
            "results file /proc/version: a kernel interface file (proc), not a file that holds "
            "data");
  EXPECT_EQ(refusal(temp_path("plain.jsonl")), "");
}

// A write into a pipe whose reader stopped (as into a hung mount) blocked in the kernel, where
// SIGINT and SIGTERM did not end it: append() now gives the write up once the stop flag is set.
TEST(results_writer, AWriteThatBlocksGivesWayToAStop) {
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  volatile sig_atomic_t stop = 0;
  auto writer = ResultsWriter::adopt(ends[1], "pipe", &stop);
  nlohmann::ordered_json big = record("s", "a", "1");
  big["reason"] = std::string(256 * 1024, 'x');  // more than the pipe holds: the write blocks
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = SIGTERM;
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(writer->append(big), ResultsWriteInterrupted);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stopper.join();
  EXPECT_LT(waited, 5.0);
  EXPECT_THROW(writer->append(record("s", "b", "2")), ResultsWriteInterrupted);  // at once
  writer.reset();  // with its write still blocked
  // Drain the pipe so the abandoned thread ends; the line it wrote is whole.
  std::string got;
  char buf[65536];
  ssize_t n;
  while (got.size() < big.dump().size() + 1 && (n = read(ends[0], buf, sizeof(buf))) > 0)
    got.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(got.back(), '\n');
  close(ends[0]);
}

// A line of valid JSON with wrong types aborted the resume with type_error.302 and no line.
TEST(resume_file, LinesThatAreNotRecordsAreSkippedWithTheirNumbers) {
  std::string path = temp_path("bad_lines.jsonl");
  std::ofstream(path) << record("s", "a", "1").dump() << "\n"
                      << R"({"case_id": 5, "params_hash": "x"})"
                      << "\n"
                      << "[1, 2]\n"
                      << R"({"case_id": "c", "sta)"
                      << "\n";
  ResumeFile f = read_resume_file(path);
  ASSERT_EQ(f.skipped.size(), 3u);
  EXPECT_EQ(f.skipped[0].rfind("2: not a record", 0), 0u) << f.skipped[0];
  EXPECT_EQ(f.skipped[1].rfind("3: not a record", 0), 0u) << f.skipped[1];
  EXPECT_EQ(f.skipped[2], "4: torn (not whole JSON)");
  EXPECT_EQ(f.line_by_case.at("a"), 1);
}

// --resume took a line for a record that every other reader of the file refuses (no
// schema_version, another schema_version, an unknown status): the case was not run again and the
// file's one record of it stayed one no report reads; and it called any line that was not JSON
// torn. One reader, one set of rules (record/): both are skipped as not records, saying why.
TEST(resume_file, ALineTheReportRefusesIsNotARecordToResumeEither) {
  std::string path = temp_path("schema.jsonl");
  nlohmann::ordered_json no_version = record("s", "b", "2"), other_version = record("s", "c", "3"),
                         unknown_status = record("s", "d", "4");
  no_version.erase("schema_version");
  other_version["schema_version"] = 2;
  unknown_status["status"] = "DONE";
  std::ofstream(path) << record("s", "a", "1").dump() << "\n"
                      << no_version.dump() << "\n"
                      << other_version.dump() << "\n"
                      << unknown_status.dump() << "\n"
                      << "not JSON at all\n";  // garbage, not the start of a record: not torn
  ResumeFile f = read_resume_file(path);
  EXPECT_EQ(f.line_by_case.count("a"), 1u);
  EXPECT_EQ(f.line_by_case.count("b") + f.line_by_case.count("c") + f.line_by_case.count("d"), 0u);
  ASSERT_EQ(f.skipped.size(), 4u);
  EXPECT_EQ(f.skipped[0], "2: not a record (no schema_version (not a dlhost results record))");
  EXPECT_EQ(f.skipped[1].rfind("3: not a record (schema_version 2 is not one", 0), 0u);
  EXPECT_EQ(f.skipped[2].rfind("4: not a record (status \"DONE\" is not one of", 0), 0u);
  EXPECT_EQ(f.skipped[3].rfind("5: not a record (not a JSON record (", 0), 0u) << f.skipped[3];
}

// Resuming into another suite's file mixed both suites silently; a renamed suite with the same
// parameters was taken as already recorded.
TEST(resume_file, AnotherSuitesRecordsAreRefused) {
  std::string path = temp_path("other_suite.jsonl");
  std::ofstream(path) << record("first", "a", "1").dump() << "\n";
  ResumeFile f = read_resume_file(path);
  EXPECT_EQ(resume_conflict(f, path, "first"), "");
  EXPECT_EQ(resume_conflict(f, path, "renamed"),
            path +
                ":1: a record of suite 'first', not of 'renamed'; a results file holds one "
                "suite: write this one to a new file (-o)");
}

// A changed --set ran the case again: one case id under two parameter sets.
TEST(resume_file, ACaseIdUnderOtherParametersIsRefused) {
  std::string path = temp_path("other_params.jsonl");
  std::ofstream(path) << record("s", "x", "1").dump() << "\n"
                      << record("s", "a", "1").dump() << "\n";
  ResumeFile f = read_resume_file(path);
  EXPECT_EQ(resume_conflict(f, path, "a", "1"), "");
  EXPECT_EQ(resume_conflict(f, path, "new", "9"), "");
  EXPECT_EQ(resume_conflict(f, path, "a", "2")
                .rfind(path + ":2: case 'a' was recorded with other "
                              "parameters",
                       0),
            0u);
}

// The hint dropped --set, so following it changed the parameters.
TEST(resume_command, RepeatsTheWholeCommandLine) {
  EXPECT_EQ(
      resume_command({"dlhost", "--plugin-path", "/p", "run", "s.yaml", "--set", "iterations=5",
                      "-o", "out.jsonl", "--case", "a b"},
                     "out.jsonl"),
      "dlhost --plugin-path /p run s.yaml --set iterations=5 --case 'a b' --resume out.jsonl");
  EXPECT_EQ(resume_command({"dlhost", "run", "s.yaml", "--output=x.jsonl"}, "x.jsonl"),
            "dlhost run s.yaml --resume x.jsonl");
  EXPECT_EQ(resume_command({"dlhost", "run", "s.yaml", "--resume", "r.jsonl"}, "r.jsonl"),
            "dlhost run s.yaml --resume r.jsonl");
  EXPECT_EQ(resume_command({"dlhost", "run", "it's.yaml"}, "results/s-1.jsonl"),
            "dlhost run 'it'\\''s.yaml' --resume results/s-1.jsonl");
}

}  // namespace
}  // namespace dlhost
