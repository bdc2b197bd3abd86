// feed.h — which part of a mini-batch goes into which input of a network's graph, checked once
// before training: the graph's float32 input takes the images (`features`), an int32 input read
// by an embedding takes the word ids (`ids`), the int32 input of the loss takes the labels or
// next words (`targets`). Per step, bind() lists the (tensor, host pointer, bytes) triples the
// runner passes to the backend's set_input. Immutable after construction: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"
#include "dlhost/dlhost_graph.h"

namespace dlhost::data {

struct InputFeed {
  int32_t tensor = -1;  // graph input id, for set_input
  const void* data = nullptr;
  size_t bytes = 0;
};

class FeedPlan {
 public:
  // Throws std::invalid_argument naming the graph input and the data set when they do not fit:
  // an input no part of the batch can fill, a per-sample size or dtype that differs, a batch
  // other than the graph's, or `classes` (labels or vocabulary) larger than the network's.
  FeedPlan(const dlhost_graph& graph, const BatchLayout& layout, int64_t batch, int64_t classes,
           const std::string& data_name);

  // The batch's arrays for every graph input, in graph input order, into `out` (cleared; its
  // capacity is reused, so a step allocates nothing).
  void bind(const Batch& batch, std::vector<InputFeed>& out) const;

 private:
  enum class Part { features, ids, targets };
  std::vector<std::pair<int32_t, Part>> inputs_;
};

}  // namespace dlhost::data
