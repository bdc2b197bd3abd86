// fake_device.h — the "device" of dlhost's device-path fixtures, shared by the asynchronous
// backend (async_device.cpp) and the stream-ordered comm (device_comm.cpp): what a GPU gives a
// backend, made of CPU parts so that every device path of the host runs and is checked here.
//
// - Device memory: one window of kWindow bytes of a memfd, mapped twice. The device view, whose
//   addresses buffers hand out, is PROT_NONE: the host touching a device pointer faults at once
//   (SIGSEGV), deterministically, as dereferencing a cudaMalloc pointer on the host is wrong. The
//   alias view, at device address + kWindow, is what "device work" (tasks on the stream) uses.
// - A stream: one worker thread running tasks in order (dlhost_host_queue).
//
// Thread-safety: Arena is used under its own mutex; Stream::enqueue is thread-safe.
#pragma once

#include <dlhost/dlhost.h>
#include <sys/mman.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace fake_device {

constexpr uint64_t kWindow = uint64_t{1} << 30;  // 1 GiB of address space; pages made on use

// Where device work reads and writes what lives at a device address.
template <class T>
T* alias(const void* device_ptr) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(device_ptr) + kWindow);
}

// The device's memory: a bump allocator over the device view, reset when everything is freed.
class Arena {
 public:
  Arena() {
    int fd = memfd_create("dlhost_fake_device", 0);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(kWindow)) != 0)
      throw std::runtime_error("fake device: memfd_create/ftruncate failed");
    void* both =
        mmap(nullptr, 2 * kWindow, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = static_cast<char*>(both);
    bool ok = both != MAP_FAILED &&
              mmap(base_, kWindow, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED &&
              mmap(base_ + kWindow, kWindow, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                   0) != MAP_FAILED;
    close(fd);
    if (!ok) throw std::runtime_error("fake device: mapping the device window failed");
  }
  ~Arena() { munmap(base_, 2 * kWindow); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A device address of `bytes` (64-byte aligned), zero-filled as cudaMalloc + memset would be
  // by a careful backend. Throws std::bad_alloc when the window is full (OOM).
  void* allocate(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t size = (bytes + 63) / 64 * 64;
    if (size == 0) size = 64;
    if (top_ + size > kWindow) throw std::bad_alloc();
    void* p = base_ + top_;
    top_ += size;
    in_use_ += size;
    if (in_use_ > peak_) peak_ = in_use_;
    std::fill_n(alias<char>(p), size, 0);
    return p;
  }
  void release(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t size = std::max<uint64_t>((bytes + 63) / 64 * 64, 64);
    in_use_ -= std::min(in_use_, size);
    if (in_use_ == 0) top_ = 0;
  }
  bool owns(const void* p) const {
    auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
    return a >= b && a < b + kWindow;
  }
  uint64_t in_use() const { return in_use_; }
  uint64_t peak() const { return peak_; }
  void reset_peak() { peak_ = in_use_; }

 private:
  char* base_ = nullptr;
  std::mutex mu_;
  uint64_t top_ = 0, in_use_ = 0, peak_ = 0;
};

// One in-order queue of work on its own thread: the stream. Exported through the ABI as a
// dlhost_host_queue, so a comm can put its collectives in the same order.
class Stream {
 public:
  Stream() : worker_([this] { run(); }) {
    queue_.struct_size = DLHOST_HOST_QUEUE_STRUCT_SIZE;
    queue_.self = this;
    queue_.enqueue = [](void* self, void (*fn)(void*), void* arg) {
      static_cast<Stream*>(self)->enqueue([fn, arg] { fn(arg); });
    };
  }
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
  }
  // Blocks until every task enqueued before the call has run.
  void synchronize() {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t target = submitted_ + tasks_.size();
    done_cv_.wait(lock, [&] { return finished_ >= target; });
  }
  // True when nothing is queued or running: an unordered host access cannot race device work.
  bool idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return tasks_.empty() && finished_ == submitted_;
  }
  dlhost_host_queue* handle() { return &queue_; }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        ++submitted_;
      }
      task();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++finished_;
      }
      done_cv_.notify_all();
    }
  }

  dlhost_host_queue queue_{};
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::function<void()>> tasks_;
  uint64_t submitted_ = 0, finished_ = 0;  // taken off the queue / finished running
  bool stop_ = false;
  std::thread worker_;  // last: it starts running in the constructor
};

}  // namespace fake_device
