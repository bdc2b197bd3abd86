// cnn.cpp — the convolutional networks: Du et al.'s LeNet, Shi et al.'s AlexNet and ResNet-50
// (ImageNet, synthetic data), AlexNet-R and ResNet-56 (CIFAR-10). Where the tools of the paper
// built a network differently, the default follows the DLBench Caffe definition and the other
// form is an option (see each builder and its description in plugin.cpp).

#include "networks.h"

namespace dlhost::networks_paper {

int32_t conv(Builder& b, const std::string& name, int32_t x, int64_t out, int64_t kernel,
             int64_t stride, int64_t pad, bool bias) {
  Builder::Conv c;
  c.out_channels = out;
  c.kernel = kernel;
  c.stride = stride;
  c.pad = pad;
  c.bias = bias;
  return b.conv2d(name, x, c);
}

int32_t max_pool(Builder& b, const std::string& name, int32_t x, int64_t kernel, int64_t stride,
                 int64_t pad, bool ceil_mode) {
  Builder::Pool p;
  p.kind = DLHOST_POOL_MAX;
  p.kernel = kernel;
  p.stride = stride;
  p.pad = pad;
  p.ceil_mode = ceil_mode;
  return b.pool2d(name, x, p);
}

void build_lenet(Builder& b, const Options&) {
  int32_t x = b.input("data", {1, 28, 28});
  int32_t labels = b.labels();
  x = max_pool(b, "pool1", conv(b, "conv1", x, 20, 5, 1, 0), 2, 2);
  x = max_pool(b, "pool2", conv(b, "conv2", x, 50, 5, 1, 0), 2, 2);
  x = b.relu("relu3", b.fc("fc3", x, 500));
  b.softmax_cross_entropy("loss", b.fc("fc4", x, 10), labels);
}

// Options: conv1_pad (2: 224 -> 55 -> ... -> 6x6 pool5, 62,378,344 parameters, Caffe's geometry;
// 0 gives 5x5 pool5), dropout (0.5; 0 removes the layers, as the TensorFlow script did), lrn
// (false; true adds the original paper's LRN after conv1 and conv2).
void build_alexnet(Builder& b, const Options& o) {
  int64_t pad1 = o.get_int("conv1_pad", 2);
  double drop = o.get_double("dropout", 0.5);
  bool lrn = o.get_bool("lrn", false);
  int32_t x = b.input("data", {3, 224, 224});
  int32_t labels = b.labels();
  x = b.relu("relu1", conv(b, "conv1", x, 96, 11, 4, pad1));
  if (lrn) x = b.lrn("norm1", x, 5, 1e-4f, 0.75f, 1.0f);
  x = max_pool(b, "pool1", x, 3, 2);
  x = b.relu("relu2", conv(b, "conv2", x, 256, 5, 1, 2));
  if (lrn) x = b.lrn("norm2", x, 5, 1e-4f, 0.75f, 1.0f);
  x = max_pool(b, "pool2", x, 3, 2);
  x = b.relu("relu3", conv(b, "conv3", x, 384, 3, 1, 1));
  x = b.relu("relu4", conv(b, "conv4", x, 384, 3, 1, 1));
  x = b.relu("relu5", conv(b, "conv5", x, 256, 3, 1, 1));
  x = max_pool(b, "pool5", x, 3, 2);
  x = b.relu("relu6", b.fc("fc6", x, 4096));
  if (drop > 0) x = b.dropout("drop6", x, static_cast<float>(drop));
  x = b.relu("relu7", b.fc("fc7", x, 4096));
  if (drop > 0) x = b.dropout("drop7", x, static_cast<float>(drop));
  b.softmax_cross_entropy("loss", b.fc("fc8", x, 1000), labels);
}

// cuda-convnet's layers-18pct without LRN, as DLBench ran it. Option pool_ceil (true: Caffe's
// ceil-mode pooling, 89,578 parameters; false: floor, 85,098).
void build_alexnet_r(Builder& b, const Options& o) {
  bool ceil_mode = o.get_bool("pool_ceil", true);
  int32_t x = b.input("data", {3, 32, 32});
  int32_t labels = b.labels();
  x = conv(b, "conv1", x, 32, 5, 1, 2);
  x = b.relu("relu1", max_pool(b, "pool1", x, 3, 2, 0, ceil_mode));
  x = b.relu("relu2", conv(b, "conv2", x, 32, 5, 1, 2));
  x = max_pool(b, "pool2", x, 3, 2, 0, ceil_mode);
  x = b.relu("relu3", conv(b, "conv3", x, 64, 5, 1, 2));
  Builder::Pool avg;
  avg.kind = DLHOST_POOL_AVG;
  avg.kernel = 3;
  avg.stride = 2;
  avg.ceil_mode = ceil_mode;
  x = b.pool2d("pool3", x, avg);
  b.softmax_cross_entropy("loss", b.fc("fc4", x, 10), labels);
}

namespace {

// conv (no bias: the batch norm's shift plays its part) -> batch norm -> optional ReLU.
int32_t conv_bn(Builder& b, const std::string& name, int32_t x, int64_t out, int64_t kernel,
                int64_t stride, int64_t pad, bool relu) {
  x = b.batch_norm(name + "_bn", conv(b, name, x, out, kernel, stride, pad, false));
  return relu ? b.relu(name + "_relu", x) : x;
}

// ResNet-50's bottleneck: 1x1 (stride here, as in He et al.'s Caffe model) -> 3x3 -> 1x1 (x4),
// projection shortcut with batch norm when the shape changes; ReLU after the add.
int32_t bottleneck(Builder& b, const std::string& name, int32_t x, int64_t width, int64_t stride,
                   bool project) {
  int32_t y = conv_bn(b, name + "_a", x, width, 1, stride, 0, true);
  y = conv_bn(b, name + "_b", y, width, 3, 1, 1, true);
  y = conv_bn(b, name + "_c", y, 4 * width, 1, 1, 0, false);
  int32_t shortcut = project ? conv_bn(b, name + "_proj", x, 4 * width, 1, stride, 0, false) : x;
  return b.relu(name + "_relu", b.add(name + "_add", y, shortcut));
}

}  // namespace

void build_resnet50(Builder& b, const Options&) {
  int32_t x = b.input("data", {3, 224, 224});
  int32_t labels = b.labels();
  x = conv_bn(b, "conv1", x, 64, 7, 2, 3, true);
  x = max_pool(b, "pool1", x, 3, 2, 1);
  const int64_t blocks[] = {3, 4, 6, 3};
  const int64_t widths[] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s) {
    for (int64_t i = 0; i < blocks[s]; ++i) {
      std::string name = "res" + std::to_string(s + 2) + static_cast<char>('a' + i);
      int64_t stride = (i == 0 && s > 0) ? 2 : 1;
      x = bottleneck(b, name, x, widths[s], stride, i == 0);
    }
  }
  x = b.global_avg_pool("pool5", x);
  b.softmax_cross_entropy("loss", b.fc("fc1000", x, 1000), labels);
}

// ResNet-56 for CIFAR-10: 3 stages x 9 basic blocks of 16/32/64 filters. Option variant:
// "dlbench" (default: the DLBench Caffe prototxt, "BN after add" with the post-add ReLU removed
// and projection shortcuts without batch norm: 855,578 parameters) or "he" (He et al.: BN before
// the add, ReLU after it, projections with batch norm: 855,770).
void build_resnet56(Builder& b, const Options& o) {
  std::string variant = o.get_string("variant", "dlbench");
  if (variant != "dlbench" && variant != "he")
    sdk::invalid("option 'variant' must be 'dlbench' or 'he', got '" + variant + "'");
  bool he = variant == "he";
  int32_t x = b.input("data", {3, 32, 32});
  int32_t labels = b.labels();
  x = conv_bn(b, "conv1", x, 16, 3, 1, 1, true);
  const int64_t widths[] = {16, 32, 64};
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 9; ++i) {
      std::string name = "res" + std::to_string(s + 1) + "_" + std::to_string(i + 1);
      bool first = i == 0 && s > 0;
      int64_t stride = first ? 2 : 1;
      int32_t y = conv_bn(b, name + "_a", x, widths[s], 3, stride, 1, true);
      y = conv(b, name + "_b", y, widths[s], 3, 1, 1, false);
      int32_t shortcut = x;
      if (first) {
        shortcut = he ? conv_bn(b, name + "_proj", x, widths[s], 1, 2, 0, false)
                      : conv(b, name + "_proj", x, widths[s], 1, 2, 0, false);
      }
      if (he) {
        y = b.batch_norm(name + "_b_bn", y);
        x = b.relu(name + "_relu", b.add(name + "_add", y, shortcut));
      } else {
        x = b.batch_norm(name + "_bn", b.add(name + "_add", y, shortcut));
      }
    }
  }
  x = b.global_avg_pool("pool", x);
  b.softmax_cross_entropy("loss", b.fc("fc10", x, 10), labels);
}

}  // namespace dlhost::networks_paper
