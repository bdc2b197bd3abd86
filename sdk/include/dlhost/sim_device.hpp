// sim_device.hpp — a simulated device, made of CPU parts, for developing and testing a device
// backend (or a stream-ordered comm) without the hardware: what a GPU gives a backend, with the
// same rules, so that code which is wrong on a GPU is wrong here too, at once and every time.
//
// - Device memory (Memory): one window of kWindow bytes of a memfd, mapped twice. The device
//   view, whose addresses allocate() hands out, is PROT_NONE: the host touching a device pointer
//   faults at once (SIGSEGV), as dereferencing a cudaMalloc pointer on the host is wrong. The
//   alias view, at device address + kWindow, is what device work (tasks on a stream) reads and
//   writes: alias<T>(device_ptr), as a kernel sees its arguments.
// - A stream (Stream): one worker thread running tasks in the order they were enqueued, like a
//   CUDA stream; the host's calls return as soon as work is enqueued. An exception out of a task
//   is sticky, as a CUDA error is: the first one is kept and reported by take_error().
//   Exported through the ABI as a dlhost_host_queue (DLHOST_STREAM_HOST_QUEUE), so a comm can put
//   its collectives in the same order.
// - An event (StreamEvent): a timestamp taken on the stream when the work before it has run.
//
// Linux only (memfd_create, mmap). Used by examples/backend_device (the device backend a vendor
// copies) and by the host's device-path test fixtures (tests/fixtures/fixture_device).
// Thread-safety: Memory locks its own mutex; Stream::enqueue and the queries are thread-safe;
// a StreamEvent is recorded from one thread at a time and read from any.
#ifndef DLHOST_SIM_DEVICE_HPP
#define DLHOST_SIM_DEVICE_HPP

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "dlhost/dlhost.h"

namespace dlhost::sdk::sim {

constexpr uint64_t kWindow = uint64_t{1} << 30;  // 1 GiB of address space; pages made on use

// Where device work reads and writes what lives at a device address.
template <class T>
T* alias(const void* device_ptr) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(device_ptr) + kWindow);
}

// The device's memory: a bump allocator over the device view, reset when everything is freed
// (a backend that frees its model frees all of it; enough for a device that runs one case).
class Memory {
 public:
  Memory() {
    int fd = memfd_create("dlhost_sim_device", 0);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(kWindow)) != 0) {
      if (fd >= 0) close(fd);
      throw std::runtime_error("sim device: memfd_create/ftruncate failed");
    }
    void* both =
        mmap(nullptr, 2 * kWindow, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    base_ = static_cast<char*>(both);
    bool ok = both != MAP_FAILED &&
              mmap(base_, kWindow, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED &&
              mmap(base_ + kWindow, kWindow, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                   0) != MAP_FAILED;
    close(fd);
    if (!ok) {
      if (both != MAP_FAILED) munmap(both, 2 * kWindow);
      throw std::runtime_error("sim device: mapping the device window failed");
    }
  }
  ~Memory() { munmap(base_, 2 * kWindow); }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // A device address of `bytes` (64-byte aligned), zero-filled as cudaMalloc + memset would be
  // by a careful backend. Throws std::bad_alloc when the window is full (the kit reports
  // RESOURCE_EXHAUSTED).
  void* allocate(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t size = rounded(bytes);
    if (size > kWindow - top_) throw std::bad_alloc();
    void* p = base_ + top_;
    top_ += size;
    in_use_ += size;
    peak_ = std::max(peak_, in_use_);
    std::fill_n(alias<char>(p), size, 0);
    return p;
  }
  // Gives back an allocation of `bytes` (the size it was allocated with).
  void release(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    in_use_ -= std::min(in_use_, rounded(bytes));
    if (in_use_ == 0) top_ = 0;
  }
  // True when [p, p + bytes) lies in the device window.
  bool owns(const void* p, uint64_t bytes = 0) const {
    auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(base_);
    return a >= b && a < b + kWindow && bytes <= b + kWindow - a;
  }
  uint64_t in_use() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_use_;
  }
  uint64_t peak() const {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_;
  }
  uint64_t total() const { return kWindow; }

 private:
  static uint64_t rounded(uint64_t bytes) { return std::max<uint64_t>((bytes + 63) / 64 * 64, 64); }

  char* base_ = nullptr;
  mutable std::mutex mu_;
  uint64_t top_ = 0, in_use_ = 0, peak_ = 0;
};

// One in-order queue of work on its own thread: the stream.
class Stream {
 public:
  Stream() : worker_([this] { run(); }) {
    queue_.struct_size = DLHOST_HOST_QUEUE_STRUCT_SIZE;
    queue_.self = this;
    queue_.enqueue = [](void* self, void (*fn)(void*), void* arg) {
      static_cast<Stream*>(self)->enqueue([fn, arg] { fn(arg); });
    };
  }
  // Waits for the work already enqueued, as destroying a CUDA stream does.
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

  // Runs `task` after everything enqueued before it; returns at once.
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
    const uint64_t target = submitted_ + tasks_.size();
    done_cv_.wait(lock, [&] { return finished_ >= target; });
  }
  // True when nothing is queued or running: an unordered host access cannot race device work.
  bool idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return tasks_.empty() && finished_ == submitted_;
  }
  // The first exception a task threw since the last call, as its what(); "" when none.
  std::string take_error() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string e;
    e.swap(error_);
    return e;
  }
  // The ABI's view of this stream (dlhost_stream.handle for DLHOST_STREAM_HOST_QUEUE).
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
      std::string failed;
      try {
        task();
      } catch (const std::exception& e) {
        failed = e.what();
      } catch (...) {
        failed = "a device task threw a non-standard exception";
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++finished_;
        if (error_.empty()) error_ = std::move(failed);
      }
      done_cv_.notify_all();
    }
  }

  dlhost_host_queue queue_{};
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::function<void()>> tasks_;
  uint64_t submitted_ = 0, finished_ = 0;  // taken off the queue / finished running
  std::string error_;                      // sticky until take_error()
  bool stop_ = false;
  std::thread worker_;  // last: it starts running in the constructor
};

// A point in a stream's work with the time the stream reached it (cudaEvent_t's part here).
class StreamEvent {
 public:
  StreamEvent() = default;
  // A record still pending holds this event: wait for it (a destroyed stream has run it).
  ~StreamEvent() {
    if (state_ == kPending) stream_->synchronize();
  }
  StreamEvent(const StreamEvent&) = delete;
  StreamEvent& operator=(const StreamEvent&) = delete;
  // Marks the point after everything enqueued on `stream` so far; returns at once. Recording
  // again moves the mark (an earlier record still pending no longer counts), as cudaEventRecord.
  void record(Stream& stream) {
    stream_ = &stream;
    state_ = kPending;
    const uint64_t mine = ++generation_;
    stream.enqueue([this, mine] {
      if (generation_ != mine) return;  // recorded again since
      when_ = std::chrono::steady_clock::now();
      state_ = kReached;
    });
  }
  bool recorded() const { return state_ != kNever; }
  bool done() const { return state_ == kReached; }
  // Blocks until the stream has reached the point (at once when never recorded).
  void synchronize() {
    if (stream_ != nullptr && !done()) stream_->synchronize();
  }
  // Milliseconds from `start` to this event; false when either has not been reached.
  bool elapsed_ms_since(const StreamEvent& start, double* ms) const {
    if (!done() || !start.done()) return false;
    *ms = std::chrono::duration<double, std::milli>(when_ - start.when_).count();
    return true;
  }

 private:
  enum : int { kNever, kPending, kReached };
  Stream* stream_ = nullptr;
  std::atomic<int> state_{kNever};
  std::atomic<uint64_t> generation_{0};
  std::chrono::steady_clock::time_point when_{};  // written on the stream before kReached
};

}  // namespace dlhost::sdk::sim

#endif  // DLHOST_SIM_DEVICE_HPP
