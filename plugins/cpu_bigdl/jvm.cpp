// jvm.cpp — see jvm.h.
#include "jvm.h"

#include <dlfcn.h>
#include <sys/resource.h>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "bigdl_config.h"
#include "dlhost/dlhost.hpp"

namespace dlhost::cpu_bigdl {

namespace sdk = dlhost::sdk;

// The JVM's thread and its queue of calls.
struct Jvm::Impl {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> jobs;
  JavaVM* vm = nullptr;
  JNIEnv* env = nullptr;

  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !jobs.empty(); });
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      // Every call's local references are freed with its frame: this thread never returns to
      // Java, which would free them otherwise.
      const bool framed = env != nullptr && env->PushLocalFrame(64) == JNI_OK;
      job();
      if (framed) env->PopLocalFrame(nullptr);
    }
  }
};

namespace {

using CreateJavaVM = jint (*)(JavaVM**, void**, void*);

// Spark 3.3's JavaModuleOptions: what Spark 3.1's classes need opened on Java 17.
const char* const kAddOpens[] = {"java.base/java.lang",
                                 "java.base/java.lang.invoke",
                                 "java.base/java.lang.reflect",
                                 "java.base/java.io",
                                 "java.base/java.net",
                                 "java.base/java.nio",
                                 "java.base/java.util",
                                 "java.base/java.util.concurrent",
                                 "java.base/java.util.concurrent.atomic",
                                 "java.base/sun.nio.ch",
                                 "java.base/sun.nio.cs",
                                 "java.base/sun.security.action",
                                 "java.base/sun.util.calendar"};

// What the JVM needs beside its heap (metaspace for Spark's and BigDL's classes, the code cache,
// thread stacks, MKL's and the JIT's own memory), and the least heap BigDL is given to work in.
constexpr uint64_t kJvmOverheadMb = 256;
constexpr uint64_t kJvmLeastHeapMb = 128;

// The JVM's memory options under a data limit (the case's memory_limit_mb is RLIMIT_DATA):
// HotSpot commits its initial heap (1/64 of the machine's memory), grows it up to 1/4 of it, and
// mallocs beside, so that under a small limit it failed at start or died mid-run; here the heap
// is capped to what the limit leaves beside the JVM's own needs, and a limit too small for any
// JVM is refused with the reason (RESOURCE_EXHAUSTED: the case is OOM, the limit named).
std::vector<std::string> memory_options() {
  const uint64_t limit = data_limit_mb();
  if (limit == 0) return {};
  if (limit < kJvmOverheadMb + kJvmLeastHeapMb)
    sdk::fail(DLHOST_CODE_RESOURCE_EXHAUSTED,
              "cpu_bigdl: memory_limit_mb " + std::to_string(limit) +
                  " is under the least a JVM with BigDL runs in (" +
                  std::to_string(kJvmOverheadMb + kJvmLeastHeapMb) +
                  " MiB: " + std::to_string(kJvmLeastHeapMb) + " of heap and " +
                  std::to_string(kJvmOverheadMb) + " beside it)");
  return {"-Xmx" + std::to_string(limit - kJvmOverheadMb) + "m", "-Xms16m",
          "-XX:ReservedCodeCacheSize=64m", "-XX:+UseSerialGC"};
}

// Makes the JVM on the calling thread (the JVM's own); throws UNAVAILABLE with the reason.
JNIEnv* create_vm(JavaVM** vm, int32_t threads) {
  const std::vector<std::string> memory = memory_options();
  void* lib = dlopen(DLHOST_BIGDL_JVM, RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr)
    sdk::fail(DLHOST_CODE_UNAVAILABLE,
              std::string("cpu_bigdl: cannot open " DLHOST_BIGDL_JVM ": ") + dlerror());
  // Read by Spark's worker when it starts an executor (jvm.h); set before the JVM copies them.
  setenv("SPARK_HOME", DLHOST_BIGDL_SPARK_HOME, 1);
  setenv("SPARK_SCALA_VERSION", "2.12", 1);
  auto create = reinterpret_cast<CreateJavaVM>(dlsym(lib, "JNI_CreateJavaVM"));
  if (create == nullptr)
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "cpu_bigdl: no JNI_CreateJavaVM in " DLHOST_BIGDL_JVM);
  std::vector<std::string> text = {"-Djava.class.path=" DLHOST_BIGDL_CLASSPATH,
                                   "-Xrs",
                                   "-Dbigdl.localMode=true",
                                   "-Djava.awt.headless=true",
                                   "-Dlog4j.configurationFile=" DLHOST_BIGDL_LOG4J2,
                                   "-Dlog4j.configuration=file:" DLHOST_BIGDL_LOG4J1};
  if (threads > 0) text.push_back("-Dbigdl.coreNumber=" + std::to_string(threads));
  text.insert(text.end(), memory.begin(), memory.end());
  for (const char* module : kAddOpens)
    text.push_back(std::string("--add-opens=") + module + "=ALL-UNNAMED");
  std::vector<JavaVMOption> options(text.size());
  for (size_t k = 0; k < text.size(); ++k) {
    options[k].optionString = text[k].data();
    options[k].extraInfo = nullptr;
  }
  JavaVMInitArgs args{};
  args.version = JNI_VERSION_1_8;
  args.nOptions = static_cast<jint>(options.size());
  args.options = options.data();
  args.ignoreUnrecognized = JNI_FALSE;
  JNIEnv* env = nullptr;
  const jint rc = create(vm, reinterpret_cast<void**>(&env), &args);
  if (rc != JNI_OK)
    sdk::fail(DLHOST_CODE_UNAVAILABLE, "cpu_bigdl: JNI_CreateJavaVM failed with " +
                                           std::to_string(rc) + " (JVM " DLHOST_BIGDL_JVM ")");
  return env;
}

// An object's toString() ("<class>: <message>" for a Throwable, "Class.method(File.java:N)" for
// a stack frame).
std::string text_of(JNIEnv* env, jobject object) {
  jclass cls = env->FindClass("java/lang/Object");
  jmethodID to_string = env->GetMethodID(cls, "toString", "()Ljava/lang/String;");
  auto s = static_cast<jstring>(env->CallObjectMethod(object, to_string));
  if (env->ExceptionCheck() || s == nullptr) {
    env->ExceptionClear();
    return "(an object whose toString() failed)";
  }
  const char* chars = env->GetStringUTFChars(s, nullptr);
  std::string out = chars != nullptr ? chars : "";
  if (chars != nullptr) env->ReleaseStringUTFChars(s, chars);
  return out;
}

}  // namespace

uint64_t data_limit_mb() {
  rlimit lim{};
  if (getrlimit(RLIMIT_DATA, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<uint64_t>(lim.rlim_cur) >> 20;
}

std::string executor_java_options() {
  std::string out = "-Dlog4j.configurationFile=" DLHOST_BIGDL_LOG4J2
                    " -Dlog4j.configuration=file:" DLHOST_BIGDL_LOG4J1;
  for (const char* module : kAddOpens)
    out += std::string(" --add-opens=") + module + "=ALL-UNNAMED";
  return out;
}

void Jvm::check(JNIEnv* env, const std::string& what) {
  jthrowable t = env->ExceptionOccurred();
  if (t == nullptr) return;
  env->ExceptionClear();
  // The exception, then its causes (BigDL wraps its errors), and where the deepest was thrown.
  std::string text = text_of(env, t);
  jclass cls = env->FindClass("java/lang/Throwable");
  jmethodID cause = env->GetMethodID(cls, "getCause", "()Ljava/lang/Throwable;");
  jmethodID trace = env->GetMethodID(cls, "getStackTrace", "()[Ljava/lang/StackTraceElement;");
  jthrowable deepest = t;
  for (int k = 0; k < 4; ++k) {
    auto next = static_cast<jthrowable>(env->CallObjectMethod(deepest, cause));
    if (env->ExceptionCheck()) env->ExceptionClear();
    if (next == nullptr || env->IsSameObject(next, deepest)) break;
    text += "; caused by " + text_of(env, next);
    deepest = next;
  }
  auto frames = static_cast<jobjectArray>(env->CallObjectMethod(deepest, trace));
  if (env->ExceptionCheck()) env->ExceptionClear();
  if (frames != nullptr && env->GetArrayLength(frames) > 0) {
    jobject top = env->GetObjectArrayElement(frames, 0);
    text += " (at " + text_of(env, top) + ")";
  }
  // The JVM's heap is full (under memory_limit_mb, or the default cap): out of memory.
  const bool oom = text.rfind("java.lang.OutOfMemoryError", 0) == 0 ||
                   text.find("caused by java.lang.OutOfMemoryError") != std::string::npos;
  sdk::fail(oom ? DLHOST_CODE_RESOURCE_EXHAUSTED : DLHOST_CODE_INTERNAL,
            "cpu_bigdl: " + what + ": " + text);
}

void Jvm::call(const std::function<void(JNIEnv*)>& body) {
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->jobs.push_back([&] {
      try {
        body(impl_->env);
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> done_lock(done_mu);
      done = true;
      done_cv.notify_one();
    });
  }
  impl_->cv.notify_one();
  std::unique_lock<std::mutex> lock(done_mu);
  done_cv.wait(lock, [&] { return done; });
  if (error) std::rethrow_exception(error);
}

Jvm& Jvm::get(int32_t threads) {
  static std::mutex mu;
  static Jvm* jvm = nullptr;  // made once, never destroyed (jvm.h)
  static std::string failed;  // why the JVM could not be made: the same answer every time
  std::lock_guard<std::mutex> lock(mu);
  if (!failed.empty()) sdk::fail(DLHOST_CODE_UNAVAILABLE, failed);
  if (jvm != nullptr) {
    if (jvm->threads_ != threads)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
                "cpu_bigdl: this process's JVM runs BigDL on threads=" +
                    std::to_string(jvm->threads_) + "; threads=" + std::to_string(threads) +
                    " needs a process of its own (one JVM per process)");
    return *jvm;
  }
  auto* made = new Jvm;
  made->impl_ = new Impl;
  made->threads_ = threads;
  Impl* impl = made->impl_;
  std::thread([impl] { impl->loop(); }).detach();
  try {
    made->call([&](JNIEnv*) { impl->env = create_vm(&impl->vm, threads); });
    made->call([&](JNIEnv* env) {
      jclass cls = find_class(env, "dlhost/bigdl/BigDLModel");
      jmethodID init = env->GetStaticMethodID(cls, "init", "(I)Ljava/lang/String;");
      check(env, "BigDLModel.init");
      auto engine = static_cast<jstring>(env->CallStaticObjectMethod(cls, init, threads));
      check(env, "BigDL's Engine.init (local mode)");
      const char* chars = env->GetStringUTFChars(engine, nullptr);
      made->engine_ = chars != nullptr ? chars : "";
      if (chars != nullptr) env->ReleaseStringUTFChars(engine, chars);
    });
  } catch (const std::exception& e) {
    failed = e.what();  // the thread and the half-made JVM stay: a JVM cannot be made twice
    throw;
  }
  jvm = made;
  return *jvm;
}

jclass find_class(JNIEnv* env, const char* name) {
  jclass cls = env->FindClass(name);
  Jvm::check(
      env, std::string("class ") + name + " (the class path is " DLHOST_BIGDL_CLASSPATH_SHORT ")");
  return cls;
}

jmethodID method(JNIEnv* env, jclass cls, const char* name, const char* signature) {
  jmethodID id = env->GetMethodID(cls, name, signature);
  Jvm::check(env, std::string("method ") + name + signature);
  return id;
}

}  // namespace dlhost::cpu_bigdl
