// results.cpp — see results.h. The lines are written by a thread of the writer's own: a write
// into a hung mount (or a pipe whose reader stopped) blocks in the kernel, where a caught
// SIGINT/SIGTERM does not end it, so the caller waits for the write with a bound it checks the
// stop flag against, and gives the write up when the run is asked to stop.
#include "run/results.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "data/file_bytes.h"
#include "output/output_file.h"

namespace dlhost {

namespace {

// How long a write may go on once the run is asked to stop: a record being written as Ctrl-C
// comes still lands whole; a write that blocks is given up.
constexpr auto kStopGrace = std::chrono::seconds(1);

// The filesystems of kernel interfaces: a file there takes writes as commands, not as data.
const char* kernel_filesystem(const struct statfs& fs) {
  switch (static_cast<unsigned long>(fs.f_type)) {
    case PROC_SUPER_MAGIC:
      return "proc";
    case SYSFS_MAGIC:
      return "sysfs";
    case DEBUGFS_MAGIC:
      return "debugfs";
    case TRACEFS_MAGIC:
      return "tracefs";
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
      return "cgroup";
    case SECURITYFS_MAGIC:
      return "securityfs";
    case BPF_FS_MAGIC:
      return "bpf";
    default:
      return nullptr;
  }
}

[[noreturn]] void refuse(int fd, const std::string& path, const std::string& why) {
  if (fd >= 0) ::close(fd);
  throw std::runtime_error("results file " + path + ": " + why);
}

// Opens `path` for appending, refusing what is not a regular file that holds data; the
// descriptor, blocking.
int open_results_file(const std::string& path) {
  auto not_regular = [&](int fd, mode_t mode) {
    refuse(fd, path,
           "not a regular file (" + data::file_kind(mode) + "); results go to a regular file");
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) not_regular(-1, st.st_mode);
  // Parent folders are created; a link or file another user planted in a shared folder is
  // refused (output/output_file.h). O_NONBLOCK: a FIFO put in place since stat() must not block
  // the open.
  int fd = -1;
  try {
    fd = output::open_for_append(path, O_RDWR | O_APPEND | O_NONBLOCK, true);
  } catch (const output::OutputError& e) {
    throw std::runtime_error(std::string("results file ") + e.what());
  }
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) not_regular(fd, st.st_mode);
  struct statfs fs {};
  if (::fstatfs(fd, &fs) == 0)
    if (const char* kernel = kernel_filesystem(fs))
      refuse(fd, path,
             std::string("a kernel interface file (") + kernel + "), not a file that holds data");
  // A file that takes no write (a driver's read-only file) fails an empty write at once; a
  // regular file on disk takes it.
  if (::write(fd, "", 0) < 0)
    refuse(fd, path, std::string("cannot write: ") + std::strerror(errno));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

// What the caller and the writing thread share, under `mutex`.
struct ResultsWriter::Channel {
  int fd = -1;
  off_t whole_size = 0;  // the file's size after the last whole line
  std::mutex mutex;
  std::condition_variable changed;
  std::string line;  // the line to write, while `pending`
  bool pending = false, quit = false;
  bool abandoned = false;  // the caller gave up on a write that blocked
  int error = 0;           // the last write's errno, 0 when it succeeded
  bool restored = true;    // after a failed write, whether the file is back to its whole lines
  ~Channel() {
    if (fd >= 0) ::close(fd);
  }

  // The writing thread: one line at a time, each fsync'ed; a failed write is cut back to the
  // last whole line (a torn line would be a lie about what ran).
  void serve() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return pending || quit; });
      if (!pending) return;
      const std::string text = std::move(line);
      lock.unlock();
      int err = output::write_all(fd, text);
      if (err == 0 && ::fsync(fd) != 0 && errno != EINVAL) err = errno;
      bool back = true;
      if (err != 0) back = ::ftruncate(fd, whole_size) == 0;
      lock.lock();
      if (err == 0) whole_size += static_cast<off_t>(text.size());
      error = err;
      restored = back;
      pending = false;
      changed.notify_all();
    }
  }
};

ResultsWriter::ResultsWriter(int fd, std::string path, const volatile sig_atomic_t* stop)
    : path_(std::move(path)), stop_(stop), channel_(std::make_shared<Channel>()) {
  channel_->fd = fd;
  channel_->whole_size = ::lseek(fd, 0, SEEK_END);
  if (channel_->whole_size < 0) channel_->whole_size = 0;
  // SIGINT and SIGTERM are blocked in the writing thread, so that they reach the caller's,
  // which decides.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  thread_ = std::thread([channel = channel_] { channel->serve(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

std::unique_ptr<ResultsWriter> ResultsWriter::adopt(int fd, const std::string& name,
                                                    const volatile sig_atomic_t* stop) {
  return std::unique_ptr<ResultsWriter>(new ResultsWriter(fd, name, stop));
}

namespace {

// Opens, locks and readies `path` for appending; the descriptor.
int open_locked(const std::string& path) {
  int fd = open_results_file(path);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error(
        "results file " + path +
        (err == EWOULDBLOCK ? std::string(" is being written by another dlhost run; wait for it "
                                          "or write to another file")
                            : ": cannot lock: " + std::string(std::strerror(err))));
  }
  // A run killed mid-write leaves a torn last line; end it so the next record starts on a line
  // of its own (readers skip the torn one).
  off_t size = ::lseek(fd, 0, SEEK_END);
  char last = '\n';
  if (size > 0 && ::pread(fd, &last, 1, size - 1) == 1 && last != '\n') {
    if (::write(fd, "\n", 1) != 1) {
      int err = errno;
      ::close(fd);
      throw std::runtime_error("cannot write results file " + path + ": " + std::strerror(err));
    }
  }
  return fd;
}

}  // namespace

ResultsWriter::ResultsWriter(const std::string& path, const volatile sig_atomic_t* stop)
    : ResultsWriter(open_locked(path), path, stop) {}

ResultsWriter::~ResultsWriter() {
  {
    std::lock_guard<std::mutex> lock(channel_->mutex);
    channel_->quit = true;
    channel_->changed.notify_all();
  }
  // A thread blocked in a write cannot be joined; it holds the channel and ends with the process.
  if (channel_->abandoned)
    thread_.detach();
  else
    thread_.join();
}

void ResultsWriter::append(const nlohmann::ordered_json& record) {
  // Invalid UTF-8 from a plugin's message must not make the whole record unwritable.
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::unique_lock<std::mutex> lock(channel_->mutex);
  if (channel_->abandoned)
    throw ResultsWriteInterrupted("results file " + path_ + ": an earlier write still blocks");
  channel_->line = std::move(line);
  channel_->pending = true;
  channel_->changed.notify_all();
  std::chrono::steady_clock::time_point give_up = std::chrono::steady_clock::time_point::max();
  while (channel_->pending) {
    channel_->changed.wait_for(lock, std::chrono::milliseconds(50));
    if (!channel_->pending || stop_ == nullptr || *stop_ == 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (give_up == std::chrono::steady_clock::time_point::max()) give_up = now + kStopGrace;
    if (now < give_up) continue;
    channel_->abandoned = true;
    throw ResultsWriteInterrupted("results file " + path_ +
                                  ": the write of this record blocked (a hung mount, a pipe no "
                                  "one reads) and the run was asked to stop; it is not written");
  }
  if (channel_->error != 0)
    throw std::runtime_error(
        "cannot write results file " + path_ + ": " + std::strerror(channel_->error) +
        (channel_->restored ? "" : " (and cannot truncate its partial last line)"));
}

}  // namespace dlhost
