// jvm.h — the one JVM of a process that cpu_bigdl hosts through JNI: libjvm.so opened by its full
// path (the JDK found at configure time) at the first context, JNI_CreateJavaVM on a thread of
// its own that then runs every JNI call of the plugin (the JVM is not made on the host's thread,
// which may be the process's first, and no host thread is ever attached to it), with
//   -Xrs          so that SIGINT/SIGTERM/SIGQUIT stay dlhost's (its case watchdog, Ctrl-C);
//   the class path of BigDL's jars, Spark 3.1.3's and the plugin's own classes;
//   Spark 3.3's --add-opens flags (what Spark 3.1 needs on Java 17: issue 42);
//   -Dbigdl.localMode=true -Dbigdl.coreNumber=<threads> (BigDL's engine without Spark);
//   -Dlog4j.configurationFile=log4j2.xml (warnings to stderr, not BigDL's INFO lines to stdout),
//   and -Dlog4j.configuration=log4j.properties (the same for Spark's log4j 1.x);
// and, in the process's environment before the JVM starts (Java reads it once), SPARK_HOME (the
// folder whose jars/ a Spark worker puts on its executors' class path) and SPARK_SCALA_VERSION,
// which Spark's standalone worker needs (`comm: bigdl_spark`, spark.cpp).
// A JVM cannot be made twice in a process, nor with other options later: the first context's
// threads hold for the process (dlhost runs every case in a process of its own); another value
// later is refused. The JVM is never destroyed (DestroyJavaVM waits for every non-daemon thread
// and BigDL's pools are such threads): it ends with the process.
// Thread-safety: Jvm::call may be used from any thread; calls run one at a time, in order.
#ifndef DLHOST_CPU_BIGDL_JVM_H
#define DLHOST_CPU_BIGDL_JVM_H

#include <jni.h>

#include <cstdint>
#include <functional>
#include <string>

namespace dlhost::cpu_bigdl {

class Jvm {
 public:
  // The process's JVM, made on first use with BigDL's engine on `threads` cores (0: every core).
  // Throws sdk::Error: UNAVAILABLE when libjvm.so or the JVM fails, FAILED_PRECONDITION when the
  // JVM already runs with other threads.
  static Jvm& get(int32_t threads);

  // Runs `body` on the JVM's thread with its JNIEnv and waits; an exception it throws (or a
  // pending Java exception, see check) comes back to the caller.
  void call(const std::function<void(JNIEnv*)>& body);

  // What BigDL's Engine reported at start ("MklBlas engine, 1 cores, local mode").
  const std::string& engine() const { return engine_; }
  int32_t threads() const { return threads_; }

  // Throws sdk::Error naming `what` when a Java exception is pending: its class, message and
  // causes (the first lines of its trace), and clears it. RESOURCE_EXHAUSTED for Java's
  // OutOfMemoryError (the heap is full), else INTERNAL.
  static void check(JNIEnv* env, const std::string& what);

  struct Impl;

 private:
  Jvm() = default;
  Impl* impl_ = nullptr;  // lives as long as the process
  std::string engine_;
  int32_t threads_ = 0;
};

// The process's data limit in MiB (RLIMIT_DATA: the case's memory_limit_mb), 0 when none. Under
// one the JVM's heap is capped to what the limit leaves beside the JVM's own needs, and a limit
// too small for a JVM is refused (RESOURCE_EXHAUSTED) when the JVM would be made.
uint64_t data_limit_mb();

// The JVM options a Spark executor needs on Java 17 (the add-opens flags above, -Xrs not), for
// spark.executor.extraJavaOptions.
std::string executor_java_options();

// Local-reference helpers, on the JVM's thread.
jclass find_class(JNIEnv* env, const char* name);
jmethodID method(JNIEnv* env, jclass cls, const char* name, const char* signature);

}  // namespace dlhost::cpu_bigdl

#endif  // DLHOST_CPU_BIGDL_JVM_H
