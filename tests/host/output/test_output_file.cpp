// test_output_file.cpp — output/output_file.h and the writers that go through it (the results
// file, export's CSV, the report folder): in a sticky world-writable folder (made here, mode
// 1777), a link or file another user planted is refused and what it points at is left as it
// was, whatever the sysctls fs.protected_symlinks / fs.protected_regular say; a link of the
// user's own is followed; whole files are replaced through a temporary file. Planting as another
// user needs root (lchown): those tests skip, saying so, when not run as root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "output/output_file.h"
#include "report/plots.h"
#include "report/report.h"
#include "run/results.h"

namespace fs = std::filesystem;
using dlhost::output::OutputError;

namespace {

// A uid that is neither root nor the tests' user: the other user who plants links.
constexpr uid_t kOther = 65534;  // nobody

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void put(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string make_temp_folder(const char* stem) {
  std::string pattern = (fs::temp_directory_path() / (std::string(stem) + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return pattern;
}

// What the message of `f()`'s OutputError (or runtime_error) says; "" when it did not throw.
template <typename F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    // In a private folder of its own: the shared folder's owner is changed by a test, and /tmp,
    // itself sticky, would then refuse it.
    base_ = make_temp_folder("dlhost-output");
    shared_ = base_ + "/shared";
    fs::create_directory(shared_);
    ASSERT_EQ(::chmod(shared_.c_str(), 01777), 0);
    elsewhere_ = make_temp_folder("dlhost-private");
    secret_ = elsewhere_ + "/secret";
    put(secret_, "root only\n");
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(base_, ec);
    fs::remove_all(elsewhere_, ec);
  }
  // Skips the test unless this process can make files of another user.
  bool can_plant() const { return ::geteuid() == 0; }
  // `name` in the shared folder, a link to `target` owned by the other user.
  std::string plant_link(const std::string& name, const std::string& target) {
    const std::string path = shared_ + "/" + name;
    fs::create_symlink(target, path);
    EXPECT_EQ(::lchown(path.c_str(), kOther, kOther), 0);
    return path;
  }

  std::string base_, shared_, elsewhere_, secret_;
};

#define SKIP_UNLESS_ROOT()                                                                 \
  if (!can_plant())                                                                        \
  GTEST_SKIP() << "planting a link as another user needs root (lchown); the tests run as " \
                  "uid "                                                                   \
               << ::geteuid()

TEST_F(OutputFile, RefusesAnotherUsersLinkInASharedFolder) {
  SKIP_UNLESS_ROOT();
  const std::string link = plant_link("run.jsonl", secret_);
  std::string why = refusal([&] { ::close(dlhost::output::open_for_append(link, O_RDWR, true)); });
  EXPECT_NE(why.find(link), std::string::npos) << why;
  EXPECT_NE(why.find("symbolic link owned by uid 65534"), std::string::npos) << why;
  why = refusal([&] { dlhost::output::write_whole_file(link, "planted\n"); });
  EXPECT_NE(why.find("refused"), std::string::npos) << why;
  EXPECT_EQ(slurp(secret_), "root only\n");
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST_F(OutputFile, RefusesADanglingPlantedLinkWithoutCreatingItsTarget) {
  SKIP_UNLESS_ROOT();
  const std::string target = elsewhere_ + "/created-by-dlhost";
  const std::string link = plant_link("cases.csv", target);
  EXPECT_NE(refusal([&] { dlhost::output::write_whole_file(link, "x\n"); }), "");
  EXPECT_NE(refusal([&] { ::close(dlhost::output::open_for_append(link, O_RDWR, true)); }), "");
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(OutputFile, RefusesAnotherUsersFileInASharedFolder) {
  SKIP_UNLESS_ROOT();
  const std::string file = shared_ + "/run.jsonl";
  put(file, "theirs\n");
  ASSERT_EQ(::chown(file.c_str(), kOther, kOther), 0);
  const std::string why =
      refusal([&] { ::close(dlhost::output::open_for_append(file, O_RDWR | O_APPEND, true)); });
  EXPECT_NE(why.find("a file owned by uid 65534"), std::string::npos) << why;
  EXPECT_NE(refusal([&] { dlhost::output::write_whole_file(file, "mine\n"); }), "");
  EXPECT_EQ(slurp(file), "theirs\n");
}

TEST_F(OutputFile, RefusesAPathThroughAnotherUsersFolderInASharedFolder) {
  SKIP_UNLESS_ROOT();
  const std::string theirs = shared_ + "/out";
  fs::create_directory(theirs);
  ASSERT_EQ(::chown(theirs.c_str(), kOther, kOther), 0);
  EXPECT_NE(refusal([&] { dlhost::output::write_whole_file(theirs + "/r.csv", "x\n"); }), "");
  EXPECT_FALSE(fs::exists(theirs + "/r.csv"));
}

TEST_F(OutputFile, FollowsALinkOfTheFoldersOwner) {
  SKIP_UNLESS_ROOT();
  // The kernel's rule too: the folder's owner may link in its own folder.
  ASSERT_EQ(::chown(shared_.c_str(), kOther, kOther), 0);
  const std::string link = plant_link("to-secret", secret_);
  dlhost::output::write_whole_file(link, "through the owner's link\n");
  EXPECT_EQ(slurp(secret_), "through the owner's link\n");
}

TEST_F(OutputFile, FollowsTheUsersOwnLinkInASharedFolder) {
  const std::string link = shared_ + "/mine.csv";
  fs::create_symlink(secret_, link);
  dlhost::output::write_whole_file(link, "replaced\n");
  EXPECT_EQ(slurp(secret_), "replaced\n");
  EXPECT_TRUE(fs::is_symlink(link)) << "the link itself must stay a link";
  int fd = dlhost::output::open_for_append(link, O_WRONLY | O_APPEND, false);
  ASSERT_EQ(::write(fd, "more\n", 5), 5);
  ::close(fd);
  EXPECT_EQ(slurp(secret_), "replaced\nmore\n");
}

TEST_F(OutputFile, FollowsTheUsersOwnLinkElsewhereAsBefore) {
  const std::string link = elsewhere_ + "/link.csv";
  const std::string target = elsewhere_ + "/sub/target.csv";
  fs::create_directory(elsewhere_ + "/sub");
  fs::create_symlink("sub/target.csv", link);  // relative: resolved from the link's folder
  dlhost::output::write_whole_file(link, "a\n");
  EXPECT_EQ(slurp(target), "a\n");
}

TEST_F(OutputFile, ReplacesAWholeFileKeepingItsModeAndLeavingNoTemporaryFile) {
  const std::string file = elsewhere_ + "/report.md";
  put(file, "old, longer than the new text\n");
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  dlhost::output::write_whole_file(file, "new\n");
  EXPECT_EQ(slurp(file), "new\n");
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(elsewhere_)) entries += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(entries, 2);  // secret and report.md
}

TEST_F(OutputFile, WritesInPlaceWhatIsNotARegularFileAndSaysWhenItFails) {
  const std::string why = refusal([] { dlhost::output::write_whole_file("/dev/full", "x\n"); });
  EXPECT_NE(why.find("/dev/full: cannot write"), std::string::npos) << why;
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  // /proc/self/fd/N, as /dev/stdout is: followed by the kernel, written in place.
  dlhost::output::write_whole_file("/proc/self/fd/" + std::to_string(ends[1]), "piped\n");
  ::close(ends[1]);
  char got[16] = {};
  EXPECT_EQ(::read(ends[0], got, sizeof(got)), 6);
  ::close(ends[0]);
  EXPECT_EQ(std::string(got), "piped\n");
  EXPECT_NE(refusal([&] { dlhost::output::write_whole_file(elsewhere_, "x"); }).find("is a folder"),
            std::string::npos);
}

TEST_F(OutputFile, RefusesASharedFolderAsAFolderToWriteInto) {
  const std::string why = refusal([&] { dlhost::output::prepare_folder(shared_); });
  EXPECT_NE(why.find("sticky folder anyone can write"), std::string::npos) << why;
  dlhost::output::prepare_folder(shared_ + "/mine/report");  // created, the user's own
  EXPECT_TRUE(fs::is_directory(shared_ + "/mine/report"));
}

// The writers themselves: each one through a planted link, as the probe of issue 43 found them.

TEST_F(OutputFile, ResultsFileRefusesAPlantedLinkAndLeavesItsTargetAlone) {
  SKIP_UNLESS_ROOT();
  put(secret_, "no newline at the end");  // the torn-line repair would append one
  const std::string link = plant_link("run.jsonl", secret_);
  const std::string why = refusal([&] { dlhost::ResultsWriter writer(link); });
  EXPECT_NE(why.find("results file " + link), std::string::npos) << why;
  EXPECT_EQ(slurp(secret_), "no newline at the end");
}

TEST_F(OutputFile, ExportRefusesAPlantedLinkAndLeavesItsTargetAlone) {
  SKIP_UNLESS_ROOT();
  const std::string link = plant_link("cases.csv", secret_);
  EXPECT_NE(refusal([&] { dlhost::report::write_csv(link, {{"case_id"}, {"x"}}); }), "");
  EXPECT_EQ(slurp(secret_), "root only\n");
}

TEST_F(OutputFile, ReportRefusesAPlantedFolderLink) {
  SKIP_UNLESS_ROOT();
  const std::string theirs = elsewhere_ + "/their-report";
  fs::create_directory(theirs);
  put(theirs + "/report.md", "the other report\n");
  const std::string results = DLHOST_TEST_SOURCE_DIR "/tests/host/report/data/results.jsonl";
  const std::string link = plant_link("rep2", theirs);
  dlhost::report::ReportOptions options;
  options.inputs = {results};
  options.folder = link;
  options.gnuplot.clear();
  EXPECT_NE(refusal([&] { dlhost::report::write_report(options); }), "");
  EXPECT_EQ(slurp(theirs + "/report.md"), "the other report\n");
}

}  // namespace
