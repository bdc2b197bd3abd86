// progress_channel.cpp — see progress_channel.h. Linux: memfd_create, /proc/PID/fd, mmap.
#include "console/progress_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>

#include "run/runner.h"

namespace dlhost {

namespace {
constexpr uint64_t kMagic = 0x5250484f534c4c44ULL;  // "DLLSOHPR": a dlhost progress page
constexpr size_t kPageBytes = 4096;
}  // namespace

struct ProgressPage {
  uint64_t magic;
  uint64_t token;
  std::atomic<uint64_t> point;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "a progress word shared between processes must be lock-free");

// 0 means "no step yet"; the phase takes the low 2 bits.
uint64_t encode_progress(int64_t step, int phase) {
  return (static_cast<uint64_t>(step + 1) << 2) | static_cast<uint64_t>(phase & 3);
}

ProgressPoint decode_progress(uint64_t word) {
  if (word == 0) return {};
  return ProgressPoint{true, static_cast<int64_t>(word >> 2) - 1, static_cast<int>(word & 3)};
}

ProgressChannel::ProgressChannel() {
  fd_ = memfd_create("dlhost-progress", MFD_CLOEXEC);
  void* p = MAP_FAILED;
  if (fd_ >= 0 && ftruncate(fd_, kPageBytes) == 0)
    p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    std::string why = std::strerror(errno);
    if (fd_ >= 0) close(fd_);
    throw std::runtime_error("progress channel: shared memory: " + why);
  }
  std::random_device random;
  uint64_t token = (static_cast<uint64_t>(random()) << 32) | random();
  page_ = new (p) ProgressPage{kMagic, token, {0}};
  std::ostringstream a;
  a << "/proc/" << getpid() << "/fd/" << fd_ << " " << std::hex << page_->token;
  address_ = a.str();
}

ProgressChannel::~ProgressChannel() {
  if (page_ != nullptr) munmap(page_, kPageBytes);
  if (fd_ >= 0) close(fd_);
}

void ProgressChannel::reset() { page_->point.store(0, std::memory_order_relaxed); }

ProgressPoint ProgressChannel::read() const {
  return decode_progress(page_->point.load(std::memory_order_relaxed));
}

void ProgressChannel::publish(int64_t step, int phase) {
  page_->point.store(encode_progress(step, phase), std::memory_order_relaxed);
}

namespace {

// The page DLHOST_PROGRESS names, mapped; null when it cannot be opened or is not ours.
std::shared_ptr<std::atomic<uint64_t>> open_channel(const std::string& address) {
  std::istringstream in(address);
  std::string path;
  uint64_t token = 0;
  if (!(in >> path >> std::hex >> token)) return nullptr;
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  uint64_t head[2] = {0, 0};
  void* p = MAP_FAILED;
  if (pread(fd, head, sizeof(head), 0) == static_cast<ssize_t>(sizeof(head)) && head[0] == kMagic &&
      head[1] == token)
    p = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  auto* page = static_cast<char*>(p);
  auto* word = reinterpret_cast<std::atomic<uint64_t>*>(page + offsetof(ProgressPage, point));
  // Written once now so the first step does not take the page fault.
  word->store(0, std::memory_order_relaxed);
  return std::shared_ptr<std::atomic<uint64_t>>(word, [page](auto*) { munmap(page, kPageBytes); });
}

}  // namespace

void attach_progress_publisher(RunContext& ctx) {
  const char* address = std::getenv(kProgressVariable);
  if (address == nullptr || ctx.rank.rank != 0) return;
  auto word = open_channel(address);
  if (!word) return;
  ctx.on_progress = [word, before = std::move(ctx.on_progress)](int64_t step, int phase) {
    if (before) before(step, phase);
    word->store(encode_progress(step, phase), std::memory_order_relaxed);
  };
}

}  // namespace dlhost
