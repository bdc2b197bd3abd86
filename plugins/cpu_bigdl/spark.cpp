// spark.cpp — `comm: bigdl_spark` (issue 42): BigDL's own distributed training, its
// DistriOptimizer on a Spark standalone cluster, as cpu_bigdl's tool runtime (ABI 1.5,
// DLHOST_EXT_TOOL_RUNTIME). For a case on N ranks:
// - the master is the runtime's one extra role (the scheduler): dlhost starts it in a process of
//   its own (`dlhost runtime-role`), where runtime_serve starts Spark's Master in this plugin's
//   JVM on the address and port dlhost picked, and blocks (dlhost ends it after the case);
// - every rank's process runs one Spark worker in its JVM (runtime_attach), on the rank's
//   address and port from dlhost's cluster (on test hosts: the rank's test host), offering the
//   case's threads as cores; the worker starts the application's executor as a JVM of its own
//   (Spark's way), a child of the rank, in its test host;
// - rank 0 is also the driver: after its worker, runtime_attach makes the SparkContext on the
//   master (one executor per worker, the case's threads as its cores, BigDL's Spark settings)
//   and waits, at most the case's startup time, until all N executors have registered;
// - the case's steps are ONE DistriOptimizer.optimize() in rank 0's run_steps (DLHOST_EXT_STEP_
//   LOOP: BigDL owns its loop here as on one node), each step's global mini-batch split evenly
//   over the N executors; the other ranks' run_steps time nothing (their process hosts a worker:
//   zeros, which the host's maximum over the ranks leaves to rank 0, whose figures the host
//   takes: run/tool_runtime.h). The driver stops the SparkContext after the last step.
// The communication time is what DistriOptimizer's own Metrics time of its AllReduceParameter
// per iteration (the gradients' reduce-scatter and the weights' all-gather through Spark's block
// managers); its "computing time average" is the compute of the same split (SparkCluster.java).
// The Spark processes need SPARK_HOME (a folder with jars/: deps/pypi/spark-3.1.3) and
// SPARK_SCALA_VERSION in their environment, and the executors Java 17's add-opens: jvm.cpp sets
// the first two before the JVM starts, the executors get the flags through
// spark.executor.extraJavaOptions.
// Thread-safety: one host thread per model; every JNI call runs on the JVM's thread.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend.h"
#include "bigdl_config.h"
#include "dlhost/dlhost.hpp"
#include "dlhost/runtime_cluster.hpp"
#include "dlhost/tool_runtime_kit.hpp"

namespace dlhost::cpu_bigdl {
namespace {

namespace sdk = dlhost::sdk;

constexpr const char* kRuntime = "bigdl_spark";
constexpr const char* kClass = "dlhost/bigdl/SparkCluster";
constexpr const char* kCommTime =
    "per iteration, DistriOptimizer's own Metrics of its AllReduceParameter through Spark's block "
    "managers, each averaged over the executors: \"put gradient\" + \"aggregrateGradientParition "
    "average executor\" (the gradients' reduce-scatter: each executor stores its gradient's N "
    "partitions, then fetches and sums its own) + \"send weights average\" + \"get weights "
    "average\" (the updated weights' all-gather); after the compute, not overlapped";
// What each executor's heap may hold (Spark's spark.executor.memory), what its worker offers,
// and Spark's least executor heap (1.5 x its 300 MiB reserve: it refuses less).
constexpr uint64_t kExecutorMemoryMb = 768;
constexpr int kWorkerMemoryMb = 1024;
constexpr uint64_t kSparkLeastExecutorMb = 450;

// The executor's heap: 768 MiB, or under the case's memory_limit_mb (RLIMIT_DATA, which the
// executor, a process of the rank's, inherits) what the limit leaves beside the JVM's own needs;
// RESOURCE_EXHAUSTED when that is under Spark's least.
std::string executor_memory() {
  const uint64_t limit = data_limit_mb();
  if (limit == 0) return std::to_string(kExecutorMemoryMb) + "m";
  const uint64_t heap = limit > 256 ? std::min(kExecutorMemoryMb, limit - 256) : 0;
  if (heap < kSparkLeastExecutorMb)
    sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED,
              "cpu_bigdl: bigdl_spark: memory_limit_mb " + std::to_string(limit) +
                  " leaves a Spark executor (a JVM of its own under the same limit) " +
                  std::to_string(heap) + " MiB of heap, under Spark's least " +
                  std::to_string(kSparkLeastExecutorMb) + " MiB (memory_limit_mb 706 or more)");
  return std::to_string(heap) + "m";
}

dlhost_status* query(const char* runtime) {
  return sdk::guard([&] {
    if (runtime == nullptr || std::string(runtime) != kRuntime)
      sdk::unimplemented(std::string("cpu_bigdl: runtime '") + (runtime ? runtime : "") +
                         "' (it owns bigdl_spark)");
  });
}

const sdk::Endpoint& place(const sdk::RuntimeCluster& cluster, const std::string& role, int index) {
  auto it = cluster.find(role);
  if (it == cluster.end() || index < 0 || static_cast<size_t>(index) >= it->second.size())
    sdk::invalid("cpu_bigdl: bigdl_spark: the cluster has no " + role + " " +
                 std::to_string(index));
  return it->second[static_cast<size_t>(index)];
}

sdk::RuntimeCluster cluster_of(const dlhost_tool_runtime_args& args) {
  if (!DLHOST_HAS_FIELD(&args, dlhost_tool_runtime_args, optimizer) || args.cluster == nullptr)
    sdk::invalid(
        "cpu_bigdl: bigdl_spark needs the host's cluster (the master's place): run the case "
        "isolated (not --no-isolate), dlhost 1.5 or later");
  return sdk::parse_runtime_cluster(args.cluster);
}

std::string master_url(const sdk::RuntimeCluster& cluster) {
  const sdk::Endpoint& m = place(cluster, "scheduler", 0);
  return "spark://" + m.address + ":" + std::to_string(m.port);
}

jstring text(JNIEnv* env, const std::string& s) { return env->NewStringUTF(s.c_str()); }

jmethodID static_method(JNIEnv* env, jclass cls, const char* name, const char* signature) {
  jmethodID id = env->GetStaticMethodID(cls, name, signature);
  Jvm::check(env, std::string("method SparkCluster.") + name + signature);
  return id;
}

// A folder of its own for a worker's executors (Spark's work dir: their logs and files).
std::string worker_dir(int rank) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                     "/dlhost-spark-worker" + std::to_string(rank) + "-XXXXXX";
  if (mkdtemp(path.data()) == nullptr)
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "cpu_bigdl: cannot make a Spark worker's folder " + path);
  return path;
}

int threads_of(const dlhost_options* options) {
  return static_cast<int>(sdk::Options(options).get_int_in("threads", 1, 0, sdk::kMaxThreads));
}

// Every rank: its Spark worker; rank 0: then the driver, waiting for every executor.
void join(dlhost_model* model, const dlhost_tool_runtime_args& args) {
  const sdk::RuntimeCluster cluster = cluster_of(args);
  const sdk::Endpoint& me = place(cluster, "worker", static_cast<int>(args.rank));
  SparkJob& job = spark_job(model);
  job.rank = static_cast<int>(args.rank);
  job.executors = static_cast<int>(args.world_size);
  const int cores = std::max(job.jvm->threads(), 1);
  const std::string master = master_url(cluster), memory = executor_memory();
  const std::string dir = worker_dir(job.rank);
  job.jvm->call([&](JNIEnv* env) {
    jclass cls = find_class(env, kClass);
    env->CallStaticVoidMethod(cls,
                              static_method(env, cls, "startWorker",
                                            "(Ljava/lang/String;IIILjava/lang/String;"
                                            "Ljava/lang/String;)V"),
                              text(env, me.address), static_cast<jint>(me.port),
                              static_cast<jint>(cores), static_cast<jint>(kWorkerMemoryMb),
                              text(env, master), text(env, dir));
    Jvm::check(env, "Spark worker " + std::to_string(job.rank) + " on " + me.text() + " (master " +
                        master + ")");
    if (job.rank != 0) return;
    env->CallStaticVoidMethod(
        cls,
        static_method(env, cls, "startDriver",
                      "(Ljava/lang/String;Ljava/lang/String;IILjava/lang/String;Ljava/lang/"
                      "String;Ljava/lang/String;Ljava/lang/String;J)V"),
        text(env, master), text(env, me.address), static_cast<jint>(job.executors),
        static_cast<jint>(cores), text(env, memory), text(env, DLHOST_BIGDL_CLASSPATH),
        text(env, executor_java_options()), text(env, dir), static_cast<jlong>(args.timeout_ms));
    Jvm::check(env, "the Spark driver (SparkContext on " + master + ", " +
                        std::to_string(job.executors) + " executors)");
  });
  job.library = "BigDL DLlib 2.4.0 DistriOptimizer on a Spark 3.1.3 standalone cluster (master " +
                master + ", " + std::to_string(job.executors) + " workers of " +
                std::to_string(cores) + " core(s), one executor each)";
  job.joined = true;
}

dlhost_status* attach(dlhost_model* model, const dlhost_tool_runtime_args* args,
                      dlhost_tool_runtime_info* info) {
  return sdk::guard([&] {
    if (args == nullptr) sdk::invalid("cpu_bigdl: runtime_attach: no args");
    sdk::check(query(args->runtime));
    if (args->role != DLHOST_RUNTIME_WORKER)
      sdk::invalid("cpu_bigdl: bigdl_spark: runtime_attach for role " + std::to_string(args->role) +
                   " (a rank is a worker)");
    join(model, *args);
    sdk::fill_runtime_info(info, "sync", spark_job(model).library.c_str(), kCommTime);
  });
}

dlhost_status* comm_times(dlhost_model* model, double* ms, size_t capacity, size_t* count) {
  return sdk::guard([&] {
    sdk::copy_comm_times(spark_job(model).comm_ms, ms, capacity, count, "cpu_bigdl: bigdl_spark");
  });
}

// The one extra role: the master (dlhost's scheduler role).
dlhost_status* roles(const char* runtime, int32_t workers, const dlhost_options*, int32_t* counts) {
  return sdk::guard([&] {
    sdk::check(query(runtime));
    if (workers < 1 || counts == nullptr) sdk::invalid("cpu_bigdl: runtime_roles: bad arguments");
    counts[DLHOST_RUNTIME_SCHEDULER] = 1;
  });
}

// The master, until dlhost ends the process.
dlhost_status* serve(const dlhost_tool_runtime_args* args) {
  return sdk::guard([&] {
    if (args == nullptr) sdk::invalid("cpu_bigdl: runtime_serve: no args");
    sdk::check(query(args->runtime));
    if (args->role != DLHOST_RUNTIME_SCHEDULER)
      sdk::invalid("cpu_bigdl: bigdl_spark: role " + std::to_string(args->role) +
                   " (its only extra role is the master, dlhost's scheduler)");
    const sdk::RuntimeCluster cluster = cluster_of(*args);
    const sdk::Endpoint& me = place(cluster, "scheduler", static_cast<int>(args->rank));
    Jvm& jvm = Jvm::get(threads_of(args->options));
    jvm.call([&](JNIEnv* env) {
      jclass cls = find_class(env, kClass);
      env->CallStaticVoidMethod(cls,
                                static_method(env, cls, "startMaster", "(Ljava/lang/String;I)V"),
                                text(env, me.address), static_cast<jint>(me.port));
      Jvm::check(env, "Spark master on " + me.text());
    });
    std::fprintf(stderr, "cpu_bigdl: Spark master on spark://%s\n", me.text().c_str());
    jvm.call([&](JNIEnv* env) {
      jclass cls = find_class(env, kClass);
      env->CallStaticVoidMethod(cls, static_method(env, cls, "awaitMaster", "()V"));
      Jvm::check(env, "Spark master");
    });
  });
}

}  // namespace

void link_tool_runtime(sdk::ExtensionChain& chain) {
  static dlhost_tool_runtime_ext ext = [] {
    dlhost_tool_runtime_ext e = sdk::tool_runtime_extension(kRuntime, query, attach, comm_times);
    e.runtime_roles = roles;
    e.runtime_serve = serve;
    return e;
  }();
  chain.link(&ext);
}

}  // namespace dlhost::cpu_bigdl
