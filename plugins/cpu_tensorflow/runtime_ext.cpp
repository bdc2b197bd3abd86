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

#ifdef DLHOST_RUNTIME_ROLE_LIMIT  // the ABI has extra roles: the host starts tf_ps's ps tasks
constexpr const char* kRuntimes = "tf_collective,tf_ps";
#else
constexpr const char* kRuntimes = "tf_collective";
#endif

dlhost_status* query(const char* runtime) {
  return sdk::guard([&] {
    const std::string name = runtime != nullptr ? runtime : "";
    if (("," + std::string(kRuntimes) + ",").find("," + name + ",") == std::string::npos ||
        name.empty())
      sdk::unimplemented("cpu_tensorflow: no runtime '" + name + "' (owns: " + kRuntimes + ")");
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
#ifdef DLHOST_RUNTIME_ROLE_LIMIT
    if (std::string(args->runtime) == "tf_ps") {
      const RuntimeText& text = ps_text(args->options);  // refuses a bad ps_mode first
      h.set_runtime(attach_ps(h, *args));
      sdk::fill_runtime_info(info, text.mode, text.library, text.comm_time);
      return;
    }
#endif
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

#ifdef DLHOST_RUNTIME_ROLE_LIMIT
// tf_ps: `ps_tasks` parameter servers (option, 1 by default) beside the workers; tf_collective:
// workers only.
dlhost_status* roles(const char* runtime, int32_t workers, const dlhost_options* options,
                     int32_t* counts) {
  return sdk::guard([&] {
    if (workers < 1 || counts == nullptr)
      sdk::invalid("cpu_tensorflow: runtime_roles: bad arguments");
    sdk::check(query(runtime));
    if (std::string(runtime) == "tf_ps")
      counts[DLHOST_RUNTIME_PARAMETER_SERVER] = ps_tasks(options);
  });
}

dlhost_status* serve(const dlhost_tool_runtime_args* args) {
  return sdk::guard([&] {
    if (args == nullptr || !DLHOST_HAS_FIELD(args, dlhost_tool_runtime_args, optimizer))
      sdk::invalid("cpu_tensorflow: runtime_serve: args missing or too short");
    if (args->runtime == nullptr || std::string(args->runtime) != "tf_ps" ||
        args->role != DLHOST_RUNTIME_PARAMETER_SERVER)
      sdk::invalid("cpu_tensorflow: runtime_serve: only tf_ps's parameter servers are served");
    serve_ps(*args);
  });
}
#endif

}  // namespace

void link_tool_runtime(sdk::ExtensionChain& chain) {
  static dlhost_tool_runtime_ext ext = [] {
    dlhost_tool_runtime_ext e = sdk::tool_runtime_extension(kRuntimes, query, attach, comm_times);
#ifdef DLHOST_RUNTIME_ROLE_LIMIT
    e.runtime_roles = roles;
    e.runtime_serve = serve;
#endif
    return e;
  }();
  chain.link(&ext);
}

}  // namespace dlhost::cpu_tensorflow
