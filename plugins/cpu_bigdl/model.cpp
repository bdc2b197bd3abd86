// model.cpp — cpu_bigdl's model: dlhost's graph lowered, node by node, to calls on the plugin's
// Java class dlhost.bigdl.BigDLModel (java/dlhost/bigdl/BigDLModel.java), which builds a BigDL
// Sequential of BigDL's own layers, its criterion and its SGD; the ABI's calls as JNI calls on
// it; and DLHOST_EXT_STEP_LOOP (ABI 1.5): the case's steps in ONE LocalOptimizer.optimize(), each
// step's time and loss as LocalOptimizer reports them; on a Spark cluster (`comm: bigdl_spark`,
// spark.cpp) ONE DistriOptimizer.optimize() on the driver (rank 0), with its compute and
// communication (its AllReduceParameter) time per step.
// What is lowered: chains (each node takes the previous node's output) of conv2d (no dilation),
// pool2d, fc (one batch dim; a rank > 2 input is flattened by BigDL's Reshape), relu / sigmoid /
// tanh, lrn and global_avg_pool, ending in softmax_cross_entropy or mse_loss. The rest is
// UNIMPLEMENTED with the reason (see `refusal`).
// Thread-safety: one host thread at a time (the ABI's rule); the JNI calls run on the JVM's
// thread (jvm.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend.h"
#include "dlhost/dlhost_device.h"
#include "dlhost/graph_access.hpp"

namespace dlhost::cpu_bigdl {

namespace {

namespace sdk = dlhost::sdk;

const char* const kClass = "dlhost/bigdl/BigDLModel";

// Why an op is not lowered here (UNIMPLEMENTED), in one line.
std::string refusal(int32_t op) {
  switch (op) {
    case DLHOST_OP_DROPOUT:
      return "BigDL's Dropout draws its own mask; dlhost's (dlhost_dropout_keep, the same on every "
             "backend) has no place in it";
    case DLHOST_OP_ADD:
      return "a residual graph needs BigDL's Graph API; this first slice builds Sequential chains";
    case DLHOST_OP_BATCH_NORM:
      return "not lowered in this first slice (BigDL's SpatialBatchNormalization is there; its "
             "running statistics are not yet checked against dlhost's rule)";
    case DLHOST_OP_EMBEDDING:
    case DLHOST_OP_LSTM:
      return "not lowered in this first slice (BigDL has LookupTable and Recurrent(LSTM))";
    default:
      return "BigDL DLlib has no counterpart lowered here (the Transformer's ops, tied fc)";
  }
}

[[noreturn]] void refuse(const dlhost_node& n, const std::string& why) {
  sdk::unimplemented("cpu_bigdl: " + sdk::node_label(n) + " (" + sdk::op_name(n.op) + "): " + why);
}

int to_int(int64_t v) { return static_cast<int>(v); }

// JNI method ids of BigDLModel, looked up once per model (on the JVM's thread).
struct Methods {
  jmethodID conv, max_pool, avg_pool, global_avg_pool, flatten, linear, relu, sigmoid, tanh, lrn;
  jmethodID cross_entropy, mse, sgd, finish, param_count, read_param, write_param;
  jmethodID set_input, set_target, forward, backward, update, read_output, add_batch, optimize;
  jmethodID optimize_spark;
  void look_up(JNIEnv* env, jclass c) {
    conv = method(env, c, "conv", "(IIIIIIIIIZII)V");
    max_pool = method(env, c, "maxPool", "(IIIIIIZ)V");
    avg_pool = method(env, c, "avgPool", "(IIIIIIZZ)V");
    global_avg_pool = method(env, c, "globalAvgPool", "(I)V");
    flatten = method(env, c, "flatten", "(I)V");
    linear = method(env, c, "linear", "(IIZII)V");
    relu = method(env, c, "relu", "()V");
    sigmoid = method(env, c, "sigmoid", "()V");
    tanh = method(env, c, "tanh", "()V");
    lrn = method(env, c, "lrn", "(IDDD)V");
    cross_entropy = method(env, c, "crossEntropy", "()V");
    mse = method(env, c, "mse", "()V");
    sgd = method(env, c, "sgd", "(DDDD)V");
    finish = method(env, c, "finish", "([I[I)V");
    param_count = method(env, c, "paramCount", "(I)I");
    read_param = method(env, c, "readParam", "(IZ[F)V");
    write_param = method(env, c, "writeParam", "(IZ[F)V");
    set_input = method(env, c, "setInput", "([F)V");
    set_target = method(env, c, "setTarget", "([F)V");
    forward = method(env, c, "forward", "()F");
    backward = method(env, c, "backward", "()V");
    update = method(env, c, "update", "()V");
    read_output = method(env, c, "readOutput", "([F)V");
    add_batch = method(env, c, "addBatch", "()V");
    optimize = method(env, c, "optimize", "(I)[D");
    optimize_spark = method(env, c, "optimizeSpark", "(II)[D");
  }
};

jintArray int_array(JNIEnv* env, const dlhost_tensor_desc& t) {
  std::vector<jint> dims;
  for (int32_t k = 0; k < t.rank; ++k) dims.push_back(static_cast<jint>(t.dims[k]));
  jintArray a = env->NewIntArray(t.rank);
  env->SetIntArrayRegion(a, 0, t.rank, dims.data());
  return a;
}

constexpr const char* kClock =
    "LocalOptimizer's own iteration time (System.nanoTime from fetching the mini-batch to the end "
    "of the SGD update: forward and backward on its model replicas, gradient aggregation, "
    "update), read per iteration from its log line";
constexpr const char* kSparkClock =
    "DistriOptimizer's own iteration time on the driver (System.nanoTime around one iteration's "
    "Spark jobs: every executor's forward and backward on its slice, the gradients' aggregation, "
    "the update, the weights sent back), read per iteration from its log line";

class BigDLModel final : public sdk::Model {
 public:
  BigDLModel(Context& context, const dlhost_graph& graph, const dlhost_optimizer_desc& optimizer)
      : jvm_(*context.jvm), params_(graph), ids_(graph) {
    threads_ = jvm_.threads();
    spark_.jvm = &jvm_;
    find_inputs(graph);
    jvm_.call([&](JNIEnv* env) {
      jclass cls = find_class(env, kClass);
      m_.look_up(env, cls);
      jobject obj = env->NewObject(cls, method(env, cls, "<init>", "()V"));
      Jvm::check(env, "new BigDLModel");
      object_ = env->NewGlobalRef(obj);
      lower(env, graph);
      env->CallVoidMethod(object_, m_.sgd, static_cast<double>(optimizer.learning_rate),
                          static_cast<double>(optimizer.momentum),
                          static_cast<double>(optimizer.weight_decay),
                          static_cast<double>(optimizer.clip_norm));
      Jvm::check(env, "BigDL's SGD");
      jintArray in = int_array(env, *graph.tensors[data_]);
      jintArray target = int_array(env, *graph.tensors[target_]);
      env->CallVoidMethod(object_, m_.finish, in, target);
      Jvm::check(env, "BigDLModel.finish");
      for (int32_t p = 0; p < graph.num_params; ++p) {
        const jint n = env->CallIntMethod(object_, m_.param_count, p);
        Jvm::check(env, "BigDLModel.paramCount");
        if (n != graph.params[p]->count)
          sdk::fail(DLHOST_CODE_INTERNAL,
                    "cpu_bigdl: BigDL's tensor for parameter " + std::to_string(p) + " ('" +
                        (graph.params[p]->name ? graph.params[p]->name : "?") + "') holds " +
                        std::to_string(n) + " elements, dlhost's " +
                        std::to_string(graph.params[p]->count));
        param_bytes_ += static_cast<uint64_t>(n) * sizeof(float);
      }
    });
    ready_.expect(params_.ready_order());
  }

  ~BigDLModel() override {
    if (object_ != nullptr) jvm_.call([&](JNIEnv* env) { env->DeleteGlobalRef(object_); });
  }

  void set_input(int32_t tensor, const void* data, size_t bytes) override {
    if (tensor == data_) {
      sdk::expect_bytes("input " + std::to_string(tensor), data != nullptr, bytes,
                        data_count_ * sizeof(float));
      send(m_.set_input, static_cast<const float*>(data), data_count_, "setInput");
      // An autoencoder's target is its input: BigDL's users give each Sample the same tensor as
      // feature and label, so the mini-batch's target is a copy of its input.
      if (target_ == data_)
        send(m_.set_target, static_cast<const float*>(data), data_count_, "setTarget");
    } else if (tensor == target_ && labels_) {
      sdk::expect_bytes("input " + std::to_string(tensor), data != nullptr, bytes,
                        target_count_ * sizeof(int32_t));
      const auto* ids = static_cast<const int32_t*>(data);
      ids_.check(tensor, ids, target_count_);
      // BigDL's ClassNLL counts classes from 1.
      staging_.resize(target_count_);
      for (size_t i = 0; i < target_count_; ++i) staging_[i] = static_cast<float>(ids[i] + 1);
      send(m_.set_target, staging_.data(), target_count_, "setTarget");
    } else if (tensor == target_) {
      sdk::expect_bytes("input " + std::to_string(tensor), data != nullptr, bytes,
                        target_count_ * sizeof(float));
      send(m_.set_target, static_cast<const float*>(data), target_count_, "setTarget");
    } else {
      sdk::invalid("cpu_bigdl: tensor " + std::to_string(tensor) + " is not an input of the graph");
    }
  }

  void forward() override {
    jvm_.call([&](JNIEnv* env) {
      loss_ = env->CallFloatMethod(object_, m_.forward);
      Jvm::check(env, "forward");
    });
  }
  void backward(const dlhost_grad_ready* ready) override {
    ready_.begin(ready);
    call_void(m_.backward, "backward");
    ready_.finish();  // BigDL's backward says nothing until it returns
  }
  void update() override { call_void(m_.update, "update (BigDL's SGD)"); }
  float loss() const override { return loss_; }

  void param_buffers(int32_t param, dlhost_buffer*, dlhost_buffer*) override {
    params_.index(param);
    sdk::unimplemented(
        "cpu_bigdl: parameters live in the JVM's heap, not in host buffers (a host comm's "
        "all-reduce is not built for BigDL: its own DistriOptimizer on Spark is the way)");
  }
  void read_param(int32_t param, int32_t part, void* data, size_t bytes) override {
    params_.access(param, part, data, bytes);
    move_param(param, part, static_cast<float*>(data), static_cast<size_t>(params_.count(param)),
               true);
  }
  void write_param(int32_t param, int32_t part, const void* data, size_t bytes) override {
    params_.access(param, part, data, bytes);
    move_param(param, part, const_cast<float*>(static_cast<const float*>(data)),
               static_cast<size_t>(params_.count(param)), false);
  }

  // The logits (the cross-entropy's input) after the last forward; no other tensor is kept.
  void read_tensor(int32_t tensor, void* data, size_t bytes) override {
    if (tensor != logits_ || logits_ < 0)
      sdk::unimplemented("cpu_bigdl: read_tensor of tensor " + std::to_string(tensor) +
                         " (BigDL's Sequential keeps only the logits, tensor " +
                         std::to_string(logits_) + ")");
    sdk::expect_bytes("tensor " + std::to_string(tensor), data != nullptr, bytes,
                      logits_count_ * sizeof(float));
    jvm_.call([&](JNIEnv* env) {
      jfloatArray a = env->NewFloatArray(static_cast<jsize>(logits_count_));
      env->CallVoidMethod(object_, m_.read_output, a);
      Jvm::check(env, "readOutput");
      env->GetFloatArrayRegion(a, 0, static_cast<jsize>(logits_count_), static_cast<float*>(data));
    });
  }

  sdk::ModelInfo info() const override {
    sdk::ModelInfo i;
    i.threads = threads_ > 0 ? threads_ : sdk::cpu_info().cores;
    i.implementation =
        "BigDL DLlib Sequential of BigDL's layers (MKL-BLAS engine), CrossEntropyCriterion, SGD";
    i.param_bytes = param_bytes_;
    return i;
  }

  // DLHOST_EXT_STEP_LOOP: the steps' mini-batches first (the host's feed, outside BigDL's
  // timing), then ONE optimize() over all of them: LocalOptimizer's, or on a Spark cluster
  // DistriOptimizer's on the driver (the other ranks' processes host Spark workers: nothing to
  // time there).
  void run_steps(const dlhost_owned_steps& steps, dlhost_owned_steps_info* info) {
    if (steps.warmup < 0 || steps.iterations < 1 || steps.step_ms == nullptr ||
        steps.loss == nullptr)
      sdk::invalid("cpu_bigdl: run_steps: negative warm-up, no timed step or no output arrays");
    const int64_t total = steps.warmup + steps.iterations;
    const bool spark = spark_.joined;
    const char* clock = spark ? kSparkClock : kClock;
    if (spark && spark_.rank != 0) {
      for (int64_t i = 0; i < total; ++i) steps.loss[i] = 0;
      for (int64_t i = 0; i < steps.iterations; ++i) steps.step_ms[i] = 0;
      if (DLHOST_HAS_FIELD(&steps, dlhost_owned_steps, compute_ms) && steps.compute_ms != nullptr)
        for (int64_t i = 0; i < steps.iterations; ++i) steps.compute_ms[i] = 0;
      spark_.comm_ms.assign(static_cast<size_t>(total), 0.0);
      spark_.compute_ms.assign(static_cast<size_t>(total), 0.0);
      loop_ = "Spark worker " + std::to_string(spark_.rank) +
              " of the case's cluster: the driver (rank 0) runs DistriOptimizer";
    } else {
      for (int64_t i = 0; i < (steps.feed != nullptr ? total : 1); ++i) {
        if (steps.feed != nullptr) sdk::check(steps.feed(steps.feed_user, i));
        call_void(m_.add_batch, "addBatch");
      }
      const size_t per = spark ? 4 : 3;  // values per step (BigDLModel.optimize / optimizeSpark)
      std::vector<double> got(per * static_cast<size_t>(total));
      jvm_.call([&](JNIEnv* env) {
        auto a = static_cast<jdoubleArray>(
            spark ? env->CallObjectMethod(object_, m_.optimize_spark, static_cast<jint>(total),
                                          static_cast<jint>(spark_.executors))
                  : env->CallObjectMethod(object_, m_.optimize, static_cast<jint>(total)));
        Jvm::check(env, spark ? "DistriOptimizer.optimize()" : "LocalOptimizer.optimize()");
        env->GetDoubleArrayRegion(a, 0, static_cast<jsize>(got.size()), got.data());
      });
      if (spark) finish_spark(got, total);
      for (int64_t i = 0; i < total; ++i) {
        const size_t k = per * static_cast<size_t>(i);
        steps.loss[i] = static_cast<float>(got[k + 1]);
        if (i >= steps.warmup) steps.step_ms[i - steps.warmup] = got[k] * 1000.0;
      }
      if (spark && DLHOST_HAS_FIELD(&steps, dlhost_owned_steps, compute_ms) &&
          steps.compute_ms != nullptr)
        for (int64_t i = 0; i < steps.iterations; ++i)
          steps.compute_ms[i] = spark_.compute_ms[static_cast<size_t>(steps.warmup + i)];
      loss_ = steps.loss[total - 1];
      loop_ = std::string("one ") + (spark ? "DistriOptimizer" : "LocalOptimizer") +
              ".optimize() over " + std::to_string(total) + " steps (" +
              std::to_string(steps.warmup) + " warm-up, " + std::to_string(steps.iterations) +
              " timed), " +
              (spark ? spark_.library + ", each step's mini-batch split over the executors"
                     : jvm_.engine()) +
              (steps.feed != nullptr ? ", a mini-batch per step from dlhost's feed"
                                     : ", dlhost's resident mini-batch every step");
    }
    if (info != nullptr) {
      if (DLHOST_HAS_FIELD(info, dlhost_owned_steps_info, clock)) info->clock = clock;
      if (DLHOST_HAS_FIELD(info, dlhost_owned_steps_info, loop)) info->loop = loop_.c_str();
    }
  }

  SparkJob& spark() { return spark_; }

 private:
  // The data input (F32, the first node's), the target (labels or the MSE target), the logits.
  void find_inputs(const dlhost_graph& g) {
    for (int32_t k = 0; k < g.num_nodes; ++k) {
      const dlhost_node& n = *g.nodes[k];
      if (n.op == DLHOST_OP_INPUT) continue;
      if (data_ < 0) data_ = n.num_inputs > 0 ? n.inputs[0] : -1;
      if (n.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY || n.op == DLHOST_OP_MSE_LOSS) {
        sdk::expect_inputs(g, n, 2);
        logits_ = n.inputs[0];
        target_ = n.inputs[1];
        labels_ = n.op == DLHOST_OP_SOFTMAX_CROSS_ENTROPY;
      }
    }
    // One data input and one loss target, or (an autoencoder) the data input as the MSE target.
    const bool self_target = target_ >= 0 && target_ == data_ && !labels_;
    if (data_ < 0 || target_ < 0 || g.num_inputs != (self_target ? 1 : 2))
      sdk::unimplemented("cpu_bigdl: the graph of '" + std::string(g.network ? g.network : "?") +
                         "' is not one data input and one loss target, nor an input that is its "
                         "own MSE target (what a BigDL Sequential with a criterion trains)");
    auto count = [&](int32_t t) {
      const dlhost_tensor_desc& d = *g.tensors[t];
      size_t c = 1;
      for (int32_t k = 0; k < d.rank; ++k) c *= static_cast<size_t>(d.dims[k]);
      return c;
    };
    data_count_ = count(data_);
    target_count_ = count(target_);
    logits_count_ = count(logits_);
  }

  // The nodes as BigDL layers, in order; each must take the previous node's output.
  void lower(JNIEnv* env, const dlhost_graph& g) {
    int32_t current = data_;
    bool ended = false;
    for (int32_t k = 0; k < g.num_nodes; ++k) {
      const dlhost_node& n = *g.nodes[k];
      if (n.op == DLHOST_OP_INPUT) continue;
      if (ended) refuse(n, "a node after the loss");
      if (n.num_inputs < 1 || n.inputs == nullptr || n.inputs[0] != current)
        refuse(n,
               "takes another tensor than the previous node's output: this first slice builds "
               "BigDL Sequential chains (a DAG needs BigDL's Graph API)");
      const dlhost_tensor_desc& x = *g.tensors[current];
      const auto param = [&](int32_t i) { return i < n.num_params ? n.params[i] : -1; };
      switch (n.op) {
        case DLHOST_OP_CONV2D: {
          const sdk::Geometry2d c = sdk::conv2d_geometry(g, n);
          if (c.dh != 1 || c.dw != 1)
            refuse(n, "dilation is BigDL's SpatialDilatedConvolution, not lowered here");
          const bool bias = sdk::node_attrs<dlhost_conv2d_attrs>(n).has_bias != 0;
          env->CallVoidMethod(object_, m_.conv, to_int(c.c), to_int(c.oc), to_int(c.kh),
                              to_int(c.kw), to_int(c.sh), to_int(c.sw), to_int(c.ph), to_int(c.pw),
                              to_int(c.groups), bias ? JNI_TRUE : JNI_FALSE, param(0),
                              bias ? param(1) : -1);
          break;
        }
        case DLHOST_OP_POOL2D: {
          const sdk::Geometry2d p = sdk::pool2d_geometry(g, n);
          const auto& a = sdk::node_attrs<dlhost_pool2d_attrs>(n);
          if (a.kind == DLHOST_POOL_MAX)
            env->CallVoidMethod(object_, m_.max_pool, to_int(p.kh), to_int(p.kw), to_int(p.sh),
                                to_int(p.sw), to_int(p.ph), to_int(p.pw),
                                a.ceil_mode ? JNI_TRUE : JNI_FALSE);
          else
            env->CallVoidMethod(object_, m_.avg_pool, to_int(p.kh), to_int(p.kw), to_int(p.sh),
                                to_int(p.sw), to_int(p.ph), to_int(p.pw),
                                a.ceil_mode ? JNI_TRUE : JNI_FALSE,
                                a.count_include_pad ? JNI_TRUE : JNI_FALSE);
          break;
        }
        case DLHOST_OP_FC: {
          const sdk::FcGeometry f = sdk::fc_geometry(g, n);
          if (f.rows != x.dims[0]) refuse(n, "a per-time-step fc (batch_dims 2) is not lowered");
          if (x.rank > 2) env->CallVoidMethod(object_, m_.flatten, to_int(f.in));
          Jvm::check(env, "BigDL's Reshape");
          env->CallVoidMethod(object_, m_.linear, to_int(f.in), to_int(f.out),
                              f.bias ? JNI_TRUE : JNI_FALSE, param(0), f.bias ? param(1) : -1);
          break;
        }
        case DLHOST_OP_ACTIVATION: {
          const int32_t kind = sdk::node_attrs<dlhost_activation_attrs>(n).kind;
          if (kind == DLHOST_ACTIVATION_RELU)
            env->CallVoidMethod(object_, m_.relu);
          else if (kind == DLHOST_ACTIVATION_SIGMOID)
            env->CallVoidMethod(object_, m_.sigmoid);
          else if (kind == DLHOST_ACTIVATION_TANH)
            env->CallVoidMethod(object_, m_.tanh);
          else
            refuse(n, "activation kind " + std::to_string(kind));
          break;
        }
        case DLHOST_OP_LRN: {
          const auto& a = sdk::node_attrs<dlhost_lrn_attrs>(n);
          env->CallVoidMethod(object_, m_.lrn, to_int(a.size), static_cast<double>(a.alpha),
                              static_cast<double>(a.beta), static_cast<double>(a.k));
          break;
        }
        case DLHOST_OP_GLOBAL_AVG_POOL:
          if (x.rank != 4) refuse(n, "needs an NCHW input");
          env->CallVoidMethod(object_, m_.global_avg_pool, to_int(x.dims[1]));
          break;
        case DLHOST_OP_SOFTMAX_CROSS_ENTROPY:
          if (x.rank != 2) refuse(n, "BigDL's CrossEntropyCriterion takes [N, classes] logits");
          env->CallVoidMethod(object_, m_.cross_entropy);
          ended = true;
          break;
        case DLHOST_OP_MSE_LOSS:
          env->CallVoidMethod(object_, m_.mse);
          ended = true;
          break;
        default:
          refuse(n, refusal(n.op));
      }
      Jvm::check(env, sdk::node_label(n) + " as a BigDL layer");
      current = n.output;
    }
    if (!ended) sdk::unimplemented("cpu_bigdl: the graph ends without a loss");
  }

  // DistriOptimizer's compute and communication per step (seconds, [k + 2], [k + 3] of `got`), then
  // the driver's SparkContext stopped: the job is over, the workers end their executors.
  void finish_spark(const std::vector<double>& got, int64_t total) {
    spark_.comm_ms.clear();
    spark_.compute_ms.clear();
    for (int64_t i = 0; i < total; ++i) {
      const size_t k = 4 * static_cast<size_t>(i);
      if (!std::isfinite(got[k + 2]) || !std::isfinite(got[k + 3]))
        sdk::fail(DLHOST_CODE_INTERNAL,
                  "cpu_bigdl: DistriOptimizer's Metrics summary gave no \"computing time "
                  "average\" or AllReduceParameter times for iteration " +
                      std::to_string(i + 1) + " (its DEBUG log changed?)");
      spark_.compute_ms.push_back(got[k + 2] * 1000.0);
      spark_.comm_ms.push_back(got[k + 3] * 1000.0);
    }
    jvm_.call([&](JNIEnv* env) {
      jclass cls = find_class(env, "dlhost/bigdl/SparkCluster");
      jmethodID stop = env->GetStaticMethodID(cls, "stopDriver", "()V");
      Jvm::check(env, "method SparkCluster.stopDriver");
      env->CallStaticVoidMethod(cls, stop);
      Jvm::check(env, "stopping the SparkContext");
    });
  }

  void send(jmethodID m, const float* data, size_t count, const char* what) {
    jvm_.call([&](JNIEnv* env) {
      jfloatArray a = env->NewFloatArray(static_cast<jsize>(count));
      env->SetFloatArrayRegion(a, 0, static_cast<jsize>(count), data);
      env->CallVoidMethod(object_, m, a);
      Jvm::check(env, what);
    });
  }

  void call_void(jmethodID m, const char* what) {
    jvm_.call([&](JNIEnv* env) {
      env->CallVoidMethod(object_, m);
      Jvm::check(env, what);
    });
  }

  void move_param(int32_t param, int32_t part, float* data, size_t count, bool out) {
    jvm_.call([&](JNIEnv* env) {
      jfloatArray a = env->NewFloatArray(static_cast<jsize>(count));
      const jboolean grad = part == DLHOST_PARAM_GRAD ? JNI_TRUE : JNI_FALSE;
      if (!out) env->SetFloatArrayRegion(a, 0, static_cast<jsize>(count), data);
      env->CallVoidMethod(object_, out ? m_.read_param : m_.write_param, param, grad, a);
      Jvm::check(env, out ? "readParam" : "writeParam");
      if (out) env->GetFloatArrayRegion(a, 0, static_cast<jsize>(count), data);
    });
  }

  Jvm& jvm_;
  sdk::ParamTable params_;
  sdk::IdInputs ids_;
  sdk::GradReadyNotices ready_;
  Methods m_{};
  jobject object_ = nullptr;
  int32_t threads_ = 0;
  int32_t data_ = -1, target_ = -1, logits_ = -1;
  bool labels_ = false;
  size_t data_count_ = 0, target_count_ = 0, logits_count_ = 0;
  std::vector<float> staging_;
  float loss_ = 0;
  uint64_t param_bytes_ = 0;
  std::string loop_;
  SparkJob spark_;
};

BigDLModel& bigdl_model(dlhost_model* model, const char* who) {
  auto* m =
      model == nullptr ? nullptr : dynamic_cast<BigDLModel*>(reinterpret_cast<sdk::Model*>(model));
  if (m == nullptr)
    sdk::invalid(std::string("cpu_bigdl: ") + who + ": not a model of this backend");
  return *m;
}

dlhost_status* run_steps(dlhost_model* model, const dlhost_owned_steps* steps,
                         dlhost_owned_steps_info* info) {
  return sdk::guard([&] {
    BigDLModel& m = bigdl_model(model, "run_steps");
    if (steps == nullptr || !DLHOST_HAS_FIELD(steps, dlhost_owned_steps, loss))
      sdk::invalid("cpu_bigdl: run_steps: steps missing or too short");
    m.run_steps(*steps, info);
  });
}

}  // namespace

SparkJob& spark_job(dlhost_model* model) {
  SparkJob& job = bigdl_model(model, "bigdl_spark").spark();
  return job;
}

const std::vector<int32_t>& lowered_ops() {
  static const std::vector<int32_t> ops = {
      DLHOST_OP_INPUT,    DLHOST_OP_FC,         DLHOST_OP_CONV2D,
      DLHOST_OP_POOL2D,   DLHOST_OP_ACTIVATION, DLHOST_OP_SOFTMAX_CROSS_ENTROPY,
      DLHOST_OP_MSE_LOSS, DLHOST_OP_LRN,        DLHOST_OP_GLOBAL_AVG_POOL};
  return ops;
}

std::unique_ptr<sdk::Model> compile_model(Context& context, const dlhost_graph& graph,
                                          const dlhost_optimizer_desc& optimizer) {
  return std::make_unique<BigDLModel>(context, graph, optimizer);
}

void link_step_loop(sdk::ExtensionChain& chain) {
  static dlhost_step_loop_ext ext = [] {
    dlhost_step_loop_ext e{};
    e.struct_size = DLHOST_STEP_LOOP_EXT_STRUCT_SIZE;
    e.type = DLHOST_EXT_STEP_LOOP;
    e.run_steps = run_steps;
    return e;
  }();
  chain.link(&ext);
}

}  // namespace dlhost::cpu_bigdl
