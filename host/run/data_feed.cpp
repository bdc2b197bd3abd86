// data_feed.cpp — see data_feed.h.
#include "run/data_feed.h"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/host_api.h"
#include "data/error.h"
#include "data/score.h"
#include "run/data_parallel.h"

namespace dlhost {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// The sequence length and vocabulary of a language model: the per-sample elements of its int32
// inputs and the vocabulary of its embedding (0, 0 for other networks).
std::pair<int64_t, int32_t> sequence_shape(const dlhost_graph& g) {
  int64_t steps = 0;
  int32_t vocabulary = 0;
  for (int32_t i = 0; i < g.num_inputs; ++i) {
    const dlhost_tensor_desc& t = *g.tensors[g.inputs[i]];
    if (t.dtype != DLHOST_DTYPE_I32 || t.rank < 2) continue;
    steps = 1;
    for (int32_t d = 1; d < t.rank; ++d) steps *= t.dims[d];
  }
  for (int32_t n = 0; n < g.num_nodes; ++n)
    if (g.nodes[n]->op == DLHOST_OP_EMBEDDING)
      vocabulary = static_cast<int32_t>(
          static_cast<const dlhost_embedding_attrs*>(g.nodes[n]->attrs)->vocab);
  return {steps, vocabulary};
}

// The logits tensor (input 0 of the softmax cross-entropy), or -1 for a network without one.
int32_t logits_tensor(const dlhost_graph& g) {
  for (int32_t n = 0; n < g.num_nodes; ++n)
    if (g.nodes[n]->op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY) return g.nodes[n]->inputs[0];
  return -1;
}

// Whether a forward in training mode differs from inference: dropout and batch normalization
// (batch statistics instead of the running ones) behave differently.
bool has_training_only_ops(const dlhost_graph& g) {
  for (int32_t n = 0; n < g.num_nodes; ++n)
    if (g.nodes[n]->op == DLHOST_OP_DROPOUT || g.nodes[n]->op == DLHOST_OP_BATCH_NORM) return true;
  return false;
}

// Batch buffers in the backend's pinned host memory where it has the memory extension (so its
// upload is a true asynchronous copy), else ordinary aligned memory.
data::HostAllocator allocator_for(const BackendDevice& device, dlhost_context* context,
                                  bool& pinned) {
  const dlhost_device_memory_ext* ext = device.memory();
  pinned = ext != nullptr;
  if (!pinned) return data::HostAllocator::aligned();
  return {[ext, context, name = device.name()](size_t bytes) {
            void* p = nullptr;
            check_status(ext->host_alloc(context, bytes, &p), name + " host_alloc (data batches)");
            return p;
          },
          [ext, context](void* p, size_t) { ext->host_free(context, p); }};
}

}  // namespace

bool uses_real_data(const CaseParams& params) { return params.data != "synthetic"; }

DataFeed::DataFeed(const CaseParams& p, const Graph& graph, const BackendDevice& device,
                   dlhost_context* context, dlhost_model* model, int64_t batch,
                   const RankEnv& world)
    : device_(device),
      context_(context),
      model_(model),
      graph_(graph),
      batch_(batch),
      world_(world),
      seed_(static_cast<uint64_t>(p.seed)) {
  const std::string& setting = p.data;
  const auto family = data::family_for_network(graph.network());
  if (!family)
    throw Error(DLHOST_CODE_INVALID_ARGUMENT,
                "network '" + graph.network() + "' trains on synthetic data only");
  const dlhost_graph& g = *graph.view();
  data::OpenOptions open;
  const auto [steps, vocabulary] = sequence_shape(g);
  if (steps > 0) open.steps = steps;
  open.max_vocabulary = vocabulary;
  const auto opened = Clock::now();
  try {
    set_ = data::open_dataset(
        data::find_files(*family, data::resolve_data_dir(setting == "real" ? "" : setting)), open);
  } catch (const data::DataError& e) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, std::string("data: ") + e.what());
  }
  open_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - opened).count();
  const std::string name = data::family_name(*family);
  try {
    plan_.emplace(g, set_.train->layout(), batch, set_.classes, name);
  } catch (const std::invalid_argument& e) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, e.what());
  }
  // The device buffers of the inputs, where the backend exports them (a GPU backend).
  std::vector<dlhost_buffer> buffers;
  plan_->bind(data::Batch(set_.train->layout(), 0, data::HostAllocator::aligned()), feeds_);
  for (const data::InputFeed& f : feeds_) {
    auto b = device.input_buffer(model, f.tensor);
    if (!b) break;
    buffers.push_back(*b);
  }
  if (!feeds_.empty() && buffers.size() == feeds_.size()) device_inputs_ = std::move(buffers);

  data::PipelineOptions o;
  o.batch = batch;
  o.epochs = p.epochs;
  o.epoch_size = p.epoch_size;
  o.seed = seed_;
  o.rank = world.rank;
  o.world = world.size;
  o.allocator = allocator_for(device, context, pinned_);
  try {
    train_ = std::make_unique<data::Pipeline>(set_.train, o);
  } catch (const std::invalid_argument& e) {
    throw Error(DLHOST_CODE_INVALID_ARGUMENT, e.what());
  }
}

DataFeed::~DataFeed() = default;

void DataFeed::take() {
  lease_ = train_->next();
  if (!lease_)
    throw Error(DLHOST_CODE_INTERNAL, "the data pipeline ran out of mini-batches after " +
                                          std::to_string(train_->stats().batches) + " steps");
}

void DataFeed::upload() {
  upload(*lease_);
  lease_.reset();
}

void DataFeed::upload(const data::Batch& batch) {
  plan_->bind(batch, feeds_);
  const dlhost_backend_api* api = device_.api();
  for (size_t i = 0; i < feeds_.size(); ++i) {
    const data::InputFeed& f = feeds_[i];
    if (device_inputs_)
      device_.copy_from_host(context_, model_, f.data, (*device_inputs_)[i], 0, f.bytes);
    else
      check_status(api->set_input(model_, f.tensor, f.data, f.bytes), "set_input (data)");
  }
}

json DataFeed::describe() const {
  const data::PipelineStats st = train_->stats();
  const data::PipelineOptions& o = train_->options();
  return json{{"set", data::family_name(set_.family)},
              {"train", set_.train->describe()},
              {"test", set_.test->describe()},
              {"files", set_.files},
              {"open_ms", open_ms_},
              {"classes", set_.classes},
              {"epochs", o.epochs},
              {"epoch_size", o.epoch_size > 0 ? o.epoch_size : set_.train->size()},
              {"steps_per_epoch", train_->steps_per_epoch()},
              {"shuffle", o.shuffle},
              {"prefetch", o.prefetch},
              {"pinned", pinned_},
              {"upload_via", upload_via()},
              {"batches", st.batches},
              {"wait_ms_total", st.wait_ms},
              {"wait_ms_max", st.max_wait_ms},
              {"fill_ms_total", st.fill_ms}};
}

json DataFeed::evaluate(DataParallel* dp) {
  const auto start = Clock::now();
  const dlhost_graph& g = *graph_.view();
  const dlhost_backend_api* api = device_.api();
  const int32_t logits = logits_tensor(g);
  const bool language_model = set_.family == data::Family::ptb;
  json out{{"split", "test"},
           {"forward", has_training_only_ops(g)
                           ? "training mode (dropout and batch statistics as in a step)"
                           : "training mode (the same as inference for this network)"}};
  // Accuracy needs the logits; without DLHOST_EXT_TENSOR_READ only the loss is scored.
  const bool classify = logits >= 0 && !language_model && device_.reads_tensors();
  if (logits >= 0 && !language_model && !classify) {
    out["accuracy_status"] = "SKIPPED";
    out["accuracy_reason"] = "backend '" + device_.name() +
                             "' does not export DLHOST_EXT_TENSOR_READ (ABI 1.3): it cannot "
                             "hand the host the logits";
  }
  data::PipelineOptions o = data::evaluation_options(batch_, world_.rank, world_.size);
  o.allocator = allocator_for(device_, context_, pinned_);
  data::Pipeline test(set_.test, o);
  const dlhost_tensor_desc* lt = logits >= 0 ? g.tensors[logits] : nullptr;
  const int64_t classes = lt ? lt->dims[lt->rank - 1] : 0;
  std::vector<float> values;
  if (classify) {
    int64_t count = 1;
    for (int32_t d = 0; d < lt->rank; ++d) count *= lt->dims[d];
    values.resize(static_cast<size_t>(count));
  }
  data::Score score;
  // Per batch, the loss is a mean over its samples (images) or predicted words (PTB).
  const int64_t per_batch = language_model ? batch_ * test.layout().targets_per_sample : batch_;
  while (auto lease = test.next()) {
    upload(*lease);
    check_status(api->forward(model_), "forward (evaluation)");
    float loss = 0;
    check_status(api->read_loss(model_, &loss), "read_loss (evaluation)");
    score.add_mean_loss(loss, per_batch);
    if (classify) {
      device_.read_tensor(model_, logits, values.data(), values.size() * sizeof(float));
      score.add_logits(values.data(), lease->targets.data(),
                       static_cast<int64_t>(values.size()) / classes, classes);
    }
  }
  if (dp) {
    std::vector<double> v{static_cast<double>(score.classified), static_cast<double>(score.correct),
                          static_cast<double>(score.loss_samples), score.loss_sum};
    dp->all_reduce_sum(v);
    score.classified = static_cast<int64_t>(v[0]);
    score.correct = static_cast<int64_t>(v[1]);
    score.loss_samples = static_cast<int64_t>(v[2]);
    score.loss_sum = v[3];
  }
  out["samples"] = test.stats().batches * batch_ * world_.size;
  out["of"] = set_.test->size();
  out["mean_loss"] = score.mean_loss();
  if (language_model) out["perplexity"] = score.perplexity();
  if (classify) {
    out["accuracy"] = score.accuracy();
    out["correct"] = score.correct;
  }
  out["seconds"] = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace dlhost
