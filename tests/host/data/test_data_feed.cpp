// test_data_feed.cpp — FeedPlan on hand-made graph views (the C structs a backend compiles): an
// MNIST classifier and a PTB language model get the right batch arrays per input, and a data
// set that does not fit the network (shape, batch, classes, vocabulary) is refused by name.
#include <gtest/gtest.h>

#include <deque>
#include <stdexcept>

#include "data/feed.h"

namespace dlhost::data {
namespace {

// Owns the structs behind one dlhost_graph view.
class GraphView {
 public:
  int32_t tensor(const char* name, dlhost_dtype dtype, std::vector<int64_t> dims) {
    dlhost_tensor_desc t{};
    t.struct_size = DLHOST_TENSOR_DESC_STRUCT_SIZE;
    t.id = static_cast<int32_t>(tensors_.size());
    t.dtype = dtype;
    t.rank = static_cast<int32_t>(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) t.dims[d] = dims[d];
    t.name = name;
    tensors_.push_back(t);
    return t.id;
  }
  int32_t input(const char* name, dlhost_dtype dtype, std::vector<int64_t> dims) {
    inputs_.push_back(tensor(name, dtype, std::move(dims)));
    return inputs_.back();
  }
  void node(dlhost_op op, std::vector<int32_t> in, const void* attrs = nullptr) {
    node_inputs_.push_back(std::move(in));
    dlhost_node n{};
    n.struct_size = DLHOST_NODE_STRUCT_SIZE;
    n.op = op;
    n.name = "node";
    n.num_inputs = static_cast<int32_t>(node_inputs_.back().size());
    n.inputs = node_inputs_.back().data();
    n.attrs = attrs;
    nodes_.push_back(n);
  }
  const dlhost_graph& view(int64_t batch) {
    tensor_ptrs_.clear();
    node_ptrs_.clear();
    for (auto& t : tensors_) tensor_ptrs_.push_back(&t);
    for (auto& n : nodes_) node_ptrs_.push_back(&n);
    graph_ = dlhost_graph{};
    graph_.struct_size = DLHOST_GRAPH_STRUCT_SIZE;
    graph_.network = "test_net";
    graph_.batch = batch;
    graph_.num_tensors = static_cast<int32_t>(tensors_.size());
    graph_.tensors = tensor_ptrs_.data();
    graph_.num_nodes = static_cast<int32_t>(nodes_.size());
    graph_.nodes = node_ptrs_.data();
    graph_.num_inputs = static_cast<int32_t>(inputs_.size());
    graph_.inputs = inputs_.data();
    return graph_;
  }

 private:
  std::deque<dlhost_tensor_desc> tensors_;
  std::deque<dlhost_node> nodes_;
  std::deque<std::vector<int32_t>> node_inputs_;
  std::vector<const dlhost_tensor_desc*> tensor_ptrs_;
  std::vector<const dlhost_node*> node_ptrs_;
  std::vector<int32_t> inputs_;
  dlhost_graph graph_{};
};

// data [N, C, H, W] -> ... -> logits [N, classes], softmax cross-entropy with labels [N].
GraphView classifier(int64_t n, std::vector<int64_t> chw, int64_t classes) {
  GraphView g;
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), chw.begin(), chw.end());
  g.input("data", DLHOST_DTYPE_F32, dims);
  int32_t labels = g.input("labels", DLHOST_DTYPE_I32, {n});
  int32_t logits = g.tensor("logits", DLHOST_DTYPE_F32, {n, classes});
  g.node(DLHOST_OP_SOFTMAX_CROSS_ENTROPY, {logits, labels});
  return g;
}

BatchLayout image_layout(int64_t c, int64_t h, int64_t w) {
  BatchLayout l;
  l.sample_shape = {c, h, w};
  l.features_per_sample = c * h * w;
  l.targets_per_sample = 1;
  return l;
}

TEST(FeedPlan, ClassifierTakesFeaturesAndLabels) {
  GraphView g = classifier(8, {784}, 10);  // fcnr flattens MNIST
  const BatchLayout layout = image_layout(1, 28, 28);
  FeedPlan plan(g.view(8), layout, 8, 10, "MNIST train");
  Batch batch(layout, 8, HostAllocator::aligned());
  std::vector<InputFeed> feeds;
  plan.bind(batch, feeds);
  ASSERT_EQ(feeds.size(), 2u);
  EXPECT_EQ(feeds[0].tensor, 0);
  EXPECT_EQ(feeds[0].data, batch.features.data());
  EXPECT_EQ(feeds[0].bytes, 8u * 784 * 4);
  EXPECT_EQ(feeds[1].tensor, 1);
  EXPECT_EQ(feeds[1].data, batch.targets.data());
  EXPECT_EQ(feeds[1].bytes, 8u * 4);
}

TEST(FeedPlan, LanguageModelTakesIdsAndNextWords) {
  GraphView g;
  int32_t words = g.input("words", DLHOST_DTYPE_I32, {4, 32});
  int32_t next = g.input("next_words", DLHOST_DTYPE_I32, {4, 32});
  dlhost_embedding_attrs emb{DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE, 10000, 256};
  g.node(DLHOST_OP_EMBEDDING, {words}, &emb);
  int32_t logits = g.tensor("logits", DLHOST_DTYPE_F32, {4, 32, 10000});
  g.node(DLHOST_OP_SOFTMAX_CROSS_ENTROPY, {logits, next});
  BatchLayout layout;
  layout.sample_shape = {32};
  layout.ids_per_sample = layout.targets_per_sample = 32;
  FeedPlan plan(g.view(4), layout, 4, 10000, "PTB train");
  Batch batch(layout, 4, HostAllocator::aligned());
  std::vector<InputFeed> feeds;
  plan.bind(batch, feeds);
  ASSERT_EQ(feeds.size(), 2u);
  EXPECT_EQ(feeds[0].data, batch.ids.data());
  EXPECT_EQ(feeds[1].data, batch.targets.data());
  EXPECT_EQ(feeds[1].bytes, 4u * 32 * 4);
  EXPECT_THROW(FeedPlan(g.view(4), layout, 4, 10001, "PTB train"), std::invalid_argument);
}

TEST(FeedPlan, RefusesDataThatDoesNotFitTheNetwork) {
  GraphView cifar_net = classifier(8, {3, 32, 32}, 10);
  try {
    FeedPlan(cifar_net.view(8), image_layout(1, 28, 28), 8, 10, "MNIST train");
    ADD_FAILURE() << "MNIST accepted by a CIFAR network";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "network test_net, input 'data' and data MNIST train: it takes 3072 elements per "
                 "sample, the data gives 784");
  }
  EXPECT_THROW(FeedPlan(cifar_net.view(8), image_layout(3, 32, 32), 16, 10, "CIFAR-10 train"),
               std::invalid_argument);  // the graph was built for 8
  EXPECT_THROW(FeedPlan(cifar_net.view(8), image_layout(3, 32, 32), 8, 100, "CIFAR-100"),
               std::invalid_argument);
  EXPECT_NO_THROW(FeedPlan(cifar_net.view(8), image_layout(3, 32, 32), 8, 10, "CIFAR-10 train"));
}

}  // namespace
}  // namespace dlhost::data
