// runtime_ext.cpp — cpu_tensorflow's DLHOST_EXT_TOOL_RUNTIME (ABI 1.5): the runtimes it owns
// (tool_runtime.h), the query, the attach that hands a compiled model to one of them, and each
// step's communication time read back. Thread-safety: the query is; the rest are called from the
// model's host thread.
#include <string>

#include "dlhost/dlhost.hpp"
#include "dlhost/tool_runtime_kit.hpp"
#include "tool_runtime.h"

namespace dlhost::cpu_tensorflow {
namespace {

namespace sdk = dlhost::sdk;

constexpr const char* kRuntimes = "tf_collective";

dlhost_status* query(const char* runtime) {
  return sdk::guard([&] {
    if (runtime == nullptr || std::string(runtime) != "tf_collective")
      sdk::unimplemented("cpu_tensorflow: no runtime '" + std::string(runtime ? runtime : "") +
                         "' (owns: " + kRuntimes + ")");
  });
}

RuntimeHost& host_of(dlhost_model* model) {
  RuntimeHost* h = model == nullptr ? nullptr : runtime_host(*reinterpret_cast<sdk::Model*>(model));
  if (h == nullptr) sdk::invalid("cpu_tensorflow: not a model of this backend");
  return *h;
}

dlhost_status* attach(dlhost_model* model, const dlhost_tool_runtime_args* args,
                      dlhost_tool_runtime_info* info) {
  return sdk::guard([&] {
    if (args == nullptr || !DLHOST_HAS_FIELD(args, dlhost_tool_runtime_args, options))
      sdk::invalid("cpu_tensorflow: runtime_attach: args missing or too short");
    sdk::check(query(args->runtime));
    if (args->role != DLHOST_RUNTIME_WORKER || args->world_size < 1 || args->rank < 0 ||
        args->rank >= args->world_size || args->store_prefix == nullptr || args->host == nullptr)
      sdk::invalid(std::string("cpu_tensorflow: ") + args->runtime +
                   ": bad rank, world, role or address");
    RuntimeHost& h = host_of(model);
    if (h.runtime() != nullptr)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_tensorflow: a runtime is already attached");
    h.set_runtime(attach_collective(h, *args));
    const RuntimeText& text = collective_text();
    sdk::fill_runtime_info(info, text.mode, text.library, text.comm_time);
  });
}

dlhost_status* comm_times(dlhost_model* model, double* ms, size_t capacity, size_t* count) {
  return sdk::guard([&] {
    const ModelRuntime* runtime = host_of(model).runtime();
    if (runtime == nullptr)
      sdk::fail(DLHOST_CODE_FAILED_PRECONDITION, "cpu_tensorflow: no runtime attached");
    sdk::copy_comm_times(runtime->comm_times(), ms, capacity, count, "cpu_tensorflow");
  });
}

}  // namespace

void link_tool_runtime(sdk::ExtensionChain& chain) {
  static dlhost_tool_runtime_ext ext =
      sdk::tool_runtime_extension(kRuntimes, query, attach, comm_times);
  chain.link(&ext);
}

}  // namespace dlhost::cpu_tensorflow
