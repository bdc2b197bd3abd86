// data_feed.h — real data for one case (`data: real | DIR`, docs/data.md): the network's data
// set opened and checked, the training split's prefetching pipeline (host/data), and each step's
// transfer of a mini-batch into the model's inputs: copy_from_host into the input's device
// buffer where the backend exports one (ABI 1.2, from its pinned host memory), else set_input.
// Also the end-of-case evaluation on the test split (`evaluate: true`): test accuracy from the
// logits (read with ABI 1.3's DLHOST_EXT_TENSOR_READ) and the test loss / perplexity.
//
// Ownership: declared after the model and context it feeds, so it goes first (its batch buffers
// may be the backend's pinned memory). Not thread-safe: the training thread drives it; the
// pipeline's own prefetching thread only fills host buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/device.h"
#include "core/graph.h"
#include "data/catalog.h"
#include "data/feed.h"
#include "data/pipeline.h"
#include "distributed/rank_env.h"
#include "suite/case_params.h"

namespace dlhost {

class DataParallel;

// Whether the case trains on real data (its `data` key is not "synthetic").
bool uses_real_data(const CaseParams& params);

class DataFeed {
 public:
  // Opens the data set of the case's network under its data directory and starts the training
  // pipeline (seeded shuffle per epoch, this rank's share of every global mini-batch). Throws
  // data::DataError naming the file and what is wrong with it, or Error(INVALID_ARGUMENT) when
  // the data set does not fit the network.
  DataFeed(const CaseParams& params, const Graph& graph, const BackendDevice& device,
           dlhost_context* context, dlhost_model* model, int64_t batch, const RankEnv& world);
  ~DataFeed();
  DataFeed(const DataFeed&) = delete;
  DataFeed& operator=(const DataFeed&) = delete;

  // Takes the next training mini-batch, waiting while the prefetcher is behind. Throws when the
  // last epoch is over (the runner never asks for more steps than total_steps()).
  void take();
  // Copies the taken mini-batch into the model's inputs and gives its buffer back.
  void upload();

  // Training steps of `epochs` whole epochs; -1 when `epochs` is 0 (the run's step count rules).
  int64_t total_steps() const { return train_->total_steps(); }
  const char* upload_via() const { return device_inputs_ ? "copy_from_host" : "set_input"; }
  bool pinned() const { return pinned_; }

  // The record's "data" block: the set, its files, epochs and the pipeline's figures.
  nlohmann::ordered_json describe() const;
  // One pass over the test split (forward only; every rank takes its share, results summed over
  // ranks through `dp`): the record's "evaluation" block.
  nlohmann::ordered_json evaluate(DataParallel* dp);

 private:
  void upload(const data::Batch& batch);

  const BackendDevice& device_;
  dlhost_context* context_;
  dlhost_model* model_;
  const Graph& graph_;
  int64_t batch_;
  RankEnv world_;
  uint64_t seed_;
  bool pinned_ = false;
  double open_ms_ = 0;  // reading and checking the files (before timing; not in any step)
  data::Dataset set_;
  std::optional<data::FeedPlan> plan_;
  std::optional<std::vector<dlhost_buffer>> device_inputs_;  // per graph input, in feed order
  std::vector<data::InputFeed> feeds_;                       // reused every step
  std::unique_ptr<data::Pipeline> train_;
  data::Pipeline::Lease lease_;
};

}  // namespace dlhost
