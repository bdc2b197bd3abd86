// pipeline.cpp — see pipeline.h.
#include "data/pipeline.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include "data/shuffle.h"

namespace dlhost::data {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Pipeline::Lease& Pipeline::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = other.owner_;
    batch_ = other.batch_;
    wait_ms_ = other.wait_ms_;
    other.owner_ = nullptr;
    other.batch_ = nullptr;
  }
  return *this;
}

void Pipeline::Lease::reset() {
  if (owner_ && batch_) owner_->give_back(batch_);
  owner_ = nullptr;
  batch_ = nullptr;
}

Pipeline::Pipeline(std::shared_ptr<const SampleSource> source, PipelineOptions options)
    : source_(std::move(source)), options_(std::move(options)) {
  const int64_t size = source_->size();
  const int64_t epoch_size = options_.epoch_size > 0 ? options_.epoch_size : size;
  const int64_t global_batch = options_.batch * options_.world;
  auto refuse = [&](const std::string& why) {
    throw std::invalid_argument("data pipeline over " + source_->describe() + ": " + why);
  };
  if (options_.batch <= 0) refuse("batch must be positive");
  if (options_.world <= 0 || options_.rank < 0 || options_.rank >= options_.world)
    refuse("rank " + std::to_string(options_.rank) + " of " + std::to_string(options_.world));
  if (options_.epochs < 0) refuse("epochs must be >= 0");
  if (options_.prefetch < 1) refuse("prefetch must be >= 1");
  if (epoch_size > size)
    refuse("epoch_size " + std::to_string(epoch_size) + " is larger than the data set");
  steps_per_epoch_ = epoch_size / global_batch;
  if (steps_per_epoch_ == 0)
    refuse("an epoch of " + std::to_string(epoch_size) + " samples has no full mini-batch of " +
           std::to_string(options_.batch) + " x " + std::to_string(options_.world) + " ranks");

  // One buffer per queued batch plus the one the consumer holds.
  for (int32_t i = 0; i <= options_.prefetch; ++i) {
    buffers_.push_back(
        std::make_unique<Batch>(source_->layout(), options_.batch, options_.allocator));
    free_.push_back(buffers_.back().get());
  }
  thread_ = std::thread([this] { produce(); });
}

Pipeline::~Pipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

int64_t Pipeline::total_steps() const {
  return options_.epochs == 0 ? -1 : options_.epochs * steps_per_epoch_;
}

void Pipeline::fill(Batch& batch, const std::vector<int64_t>& order, int64_t step) const {
  const int64_t in_epoch = step % steps_per_epoch_;
  const int64_t first = (in_epoch * options_.world + options_.rank) * options_.batch;
  for (int64_t j = 0; j < options_.batch; ++j) {
    const int64_t index = order[static_cast<size_t>(first + j)];
    source_->fill(index, batch, j);
    batch.samples[static_cast<size_t>(j)] = index;
  }
  batch.step = step;
  batch.epoch = step / steps_per_epoch_;
  batch.step_in_epoch = in_epoch;
}

void Pipeline::produce() {
  try {
    const int64_t total = total_steps();
    std::vector<int64_t> order;
    for (int64_t step = 0; total < 0 || step < total; ++step) {
      const int64_t epoch = step / steps_per_epoch_;
      if (step % steps_per_epoch_ == 0)
        order = epoch_order(source_->size(), options_.seed, epoch, options_.shuffle);
      Batch* batch = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !free_.empty(); });
        if (stopping_) return;
        batch = free_.front();
        free_.pop_front();
      }
      auto t0 = Clock::now();
      fill(*batch, order, step);
      const double fill_ms = ms_between(t0, Clock::now());
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(batch);
        stats_.fill_ms += fill_ms;
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  changed_.notify_all();
}

Pipeline::Lease Pipeline::next() {
  auto t0 = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !ready_.empty() || finished_; });
  Lease lease;
  if (ready_.empty()) {
    if (failure_) std::rethrow_exception(failure_);
    return lease;  // the last epoch is done
  }
  lease.owner_ = this;
  lease.batch_ = ready_.front();
  ready_.pop_front();
  lease.wait_ms_ = ms_between(t0, Clock::now());
  stats_.batches += 1;
  stats_.wait_ms += lease.wait_ms_;
  if (lease.wait_ms_ > stats_.max_wait_ms) stats_.max_wait_ms = lease.wait_ms_;
  return lease;
}

void Pipeline::give_back(Batch* batch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(batch);
  }
  changed_.notify_all();
}

PipelineStats Pipeline::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace dlhost::data
