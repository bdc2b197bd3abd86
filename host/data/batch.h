// batch.h — one mini-batch in host memory, as the runner copies it into a backend's input
// buffers: contiguous arrays, allocated once (through a HostAllocator, so a GPU backend can give
// pinned memory) and touched at allocation, then refilled in place step after step (touching
// fresh memory costs ~12 us per 4 KiB page on the reference machine, measured there).
// A Batch is owned by the Pipeline and lent to one thread at a time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace dlhost::data {

// Where batch buffers come from. The default is 64-byte-aligned ordinary memory; a backend with
// a device stream can supply page-locked memory so that its upload is a true asynchronous copy.
struct HostAllocator {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* p, size_t bytes)> deallocate;

  static HostAllocator aligned();
};

// A fixed-size array of T from a HostAllocator, zero-filled (so every page is faulted in) once.
template <typename T>
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(size_t count, const HostAllocator& alloc) : count_(count) {
    if (count == 0) return;
    void* p = alloc.allocate(count * sizeof(T));
    data_ = std::unique_ptr<T[], std::function<void(T*)>>(
        static_cast<T*>(p),
        [free = alloc.deallocate, bytes = count * sizeof(T)](T* q) { free(q, bytes); });
    std::fill(data_.get(), data_.get() + count, T{});
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }
  bool empty() const { return count_ == 0; }

 private:
  std::unique_ptr<T[], std::function<void(T*)>> data_;
  size_t count_ = 0;
};

// What one sample contributes to a mini-batch; a part with 0 elements is absent.
struct BatchLayout {
  std::vector<int64_t> sample_shape;  // of `features` (C, H, W) or of `ids`/`targets` (steps)
  int64_t features_per_sample = 0;    // float32, normalized pixels (images)
  int64_t ids_per_sample = 0;         // int32 input word ids (language model)
  int64_t targets_per_sample = 0;     // int32 class labels (1) or next-word ids (steps)
};

// One mini-batch of `batch` samples, sample-major: features NCHW, ids and targets [batch, steps].
struct Batch {
  Batch(const BatchLayout& layout, int64_t batch, const HostAllocator& alloc);

  HostBuffer<float> features;
  HostBuffer<int32_t> ids;
  HostBuffer<int32_t> targets;

  // Where the batch sits in the run: its step over all epochs, its epoch, its step within it,
  // and which data-set samples it holds (slot order), for checks and for debugging.
  int64_t step = -1, epoch = -1, step_in_epoch = -1;
  std::vector<int64_t> samples;
};

}  // namespace dlhost::data
