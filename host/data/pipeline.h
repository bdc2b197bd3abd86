// pipeline.h — the input pipeline of a training run: per-epoch shuffled order, mini-batches
// filled by one prefetching thread into a bounded queue of reusable Batch buffers, handed to the
// training loop one at a time with the time it waited for each.
//
// Epochs: an epoch visits `epoch_size` samples (all of the data set when 0) in that epoch's
// order (shuffle.h); it has floor(epoch_size / (batch * world)) steps: a last partial mini-batch
// is dropped, so every step has the compiled batch size. With epoch_size below the set's size a
// shuffled epoch sees a fresh random subset; an unshuffled one the same first samples.
// Data parallelism: every rank computes the same order; step s of rank r takes positions
// [(s * world + r) * batch, +batch) of it, so the ranks' batches together are one global batch.
//
// Ownership and threads: the Pipeline owns its thread and buffers. next() and the Lease it
// returns are for one consumer thread; a Lease gives its buffer back when destroyed, and must
// not outlive the Pipeline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "data/batch.h"
#include "data/source.h"

namespace dlhost::data {

struct PipelineOptions {
  int64_t batch = 0;       // samples per rank and step
  int64_t epochs = 1;      // 0: no end (batches until the Pipeline is destroyed)
  int64_t epoch_size = 0;  // samples per epoch over all ranks; 0: the whole data set
  bool shuffle = true;
  uint64_t seed = 0;
  int64_t rank = 0, world = 1;
  int32_t prefetch = 4;  // batches filled ahead of the consumer (the queue's capacity), >= 1
  HostAllocator allocator = HostAllocator::aligned();
};

struct PipelineStats {
  int64_t batches = 0;     // handed to the consumer
  double wait_ms = 0;      // consumer time blocked in next(), summed
  double max_wait_ms = 0;  // longest single wait
  double fill_ms = 0;      // producer time spent filling batches, summed
};

class Pipeline {
 public:
  // A batch lent to the consumer; gives the buffer back to the pipeline when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { reset(); }
    void reset();

    explicit operator bool() const { return batch_ != nullptr; }
    const Batch& operator*() const { return *batch_; }
    const Batch* operator->() const { return batch_; }
    double wait_ms() const { return wait_ms_; }  // how long next() blocked for this batch

   private:
    friend class Pipeline;
    Pipeline* owner_ = nullptr;
    Batch* batch_ = nullptr;
    double wait_ms_ = 0;
  };

  // Throws std::invalid_argument when the options give no full mini-batch per epoch.
  Pipeline(std::shared_ptr<const SampleSource> source, PipelineOptions options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next mini-batch in order, waiting for the prefetcher when none is ready; an empty Lease
  // after the last epoch. Rethrows what the prefetching thread threw.
  Lease next();

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const;  // -1 when epochs == 0
  const BatchLayout& layout() const { return source_->layout(); }
  const PipelineOptions& options() const { return options_; }
  PipelineStats stats() const;

 private:
  void produce();
  void fill(Batch& batch, const std::vector<int64_t>& order, int64_t step) const;
  void give_back(Batch* batch);

  std::shared_ptr<const SampleSource> source_;
  PipelineOptions options_;
  int64_t steps_per_epoch_ = 0;
  std::vector<std::unique_ptr<Batch>> buffers_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Batch*> free_, ready_;  // guarded by mutex_
  bool stopping_ = false, finished_ = false;
  std::exception_ptr failure_;
  PipelineStats stats_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace dlhost::data
