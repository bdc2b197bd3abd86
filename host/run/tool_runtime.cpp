// tool_runtime.cpp — see tool_runtime.h: a case whose comm is a backend's own runtime.
#include "run/tool_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "distributed/store_address.h"
#include "dlhost/dlhost_device.h"
#include "dlhost/runtime_cluster.hpp"

namespace dlhost {
namespace {

const dlhost_tool_runtime_ext* find_ext(const LoadedPlugin& backend) {
  if (backend.table == nullptr || backend.speaks_minor < 5) return nullptr;
  // The chain was checked for cycles and length when the plugin loaded (resolve_extensions).
  const auto* e = reinterpret_cast<const dlhost_tool_runtime_ext*>(
      dlhost_find_extension(backend.table->extensions, DLHOST_EXT_TOOL_RUNTIME));
  return e != nullptr && e->struct_size >= DLHOST_TOOL_RUNTIME_EXT_STRUCT_SIZE ? e : nullptr;
}

bool owns(const char* runtimes, const std::string& name) {
  const std::string list = std::string(",") + (runtimes ? runtimes : "") + ",";
  return list.find("," + name + ",") != std::string::npos;
}

// Where this rank's runtime listens and its peers reach it: loopback when every rank is on this
// node (no name resolution, no routable interface needed); else the local address this rank
// sends from toward the rendezvous store (DLHOST_STORE's HOST), which the other ranks reach too:
// on test hosts that is the rank's own namespace's address (every test host shares this
// machine's name, so the name would resolve alike for all); else, with no store named, this
// node's name.
std::string rank_address(const RankEnv& world) {
  if (world.local_size == world.size) return "127.0.0.1";
  if (const char* store = std::getenv("DLHOST_STORE"); store != nullptr) {
    // "SECRET@HOST:PORT", HOST an IPv6 literal in brackets.
    std::string host = store;
    if (const size_t at = host.find('@'); at != std::string::npos) host.erase(0, at + 1);
    if (const size_t colon = host.rfind(':'); colon != std::string::npos) host.erase(colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    if (!host.empty()) return local_source_address({host});
  }
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

bool takes_bucket_mb(const std::string& runtime) { return runtime == "torch_ddp"; }

bool driven_by_rank_0(const std::string& runtime) { return runtime == "bigdl_spark"; }

std::optional<std::string> tool_runtime_refusal(const LoadedPlugin& backend,
                                                const std::string& runtime) {
  const dlhost_tool_runtime_ext* ext = find_ext(backend);
  if (ext == nullptr || !owns(ext->runtimes, runtime))
    return "comm '" + runtime + "' is a tool's own runtime, and backend '" + backend.name +
           "' does not own it" +
           (ext == nullptr ? std::string(" (it has no tool runtime)")
                           : " (it owns: " + std::string(ext->runtimes) + ")");
  StatusPtr why(ext->runtime_query(runtime.c_str()));
  if (why)
    return "comm '" + runtime + "' cannot run on backend '" + backend.name + "': " + why->message;
  return std::nullopt;
}

namespace {

std::string store_prefix(const std::string& runtime) {
  return "dlhost/tool_runtime/" + runtime + "/";
}

// The arguments of runtime_attach and runtime_serve; `strings` keeps what they point at.
dlhost_tool_runtime_args runtime_args(const std::string& runtime, int32_t role, int rank,
                                      int workers, const std::string& host, const RuntimeJob& job,
                                      const dlhost_options& options, double timeout_s,
                                      std::vector<std::string>& strings) {
  strings = {runtime, store_prefix(runtime), host, job.cluster};
  // With a cluster, where this process listens is its place there (a test host's address).
  if (!job.cluster.empty()) {
    const sdk::RuntimeCluster cluster = sdk::parse_runtime_cluster(job.cluster);
    auto it = cluster.find(sdk::runtime_role_name(role));
    if (it == cluster.end() || rank < 0 || static_cast<size_t>(rank) >= it->second.size())
      throw Error(DLHOST_CODE_INTERNAL, "the runtime cluster '" + job.cluster + "' has no " +
                                            sdk::runtime_role_name(role) + " " +
                                            std::to_string(rank));
    strings[2] = it->second[rank].address;
  }
  dlhost_tool_runtime_args args{};
  args.struct_size = DLHOST_TOOL_RUNTIME_ARGS_STRUCT_SIZE;
  args.runtime = strings[0].c_str();
  args.rank = rank;
  args.world_size = workers;
  args.role = role;
  args.store_prefix = strings[1].c_str();
  args.host = strings[2].c_str();
  args.timeout_ms = static_cast<int64_t>(std::min(timeout_s, 1e9) * 1000.0);
  args.options = &options;
  args.cluster = job.cluster.empty() ? nullptr : strings[3].c_str();
  args.optimizer = job.optimizer;
  return args;
}

}  // namespace

std::vector<RuntimeRoleCount> tool_runtime_roles(const LoadedPlugin& backend,
                                                 const std::string& runtime, int workers,
                                                 const dlhost_options& options) {
  const dlhost_tool_runtime_ext* ext = find_ext(backend);
  if (ext == nullptr || ext->runtime_roles == nullptr) return {};
  int32_t counts[DLHOST_RUNTIME_ROLE_LIMIT] = {};
  check_status(ext->runtime_roles(runtime.c_str(), workers, &options, counts),
               runtime + ": runtime_roles");
  std::vector<RuntimeRoleCount> out;
  for (int32_t r = DLHOST_RUNTIME_WORKER + 1; r < DLHOST_RUNTIME_ROLE_LIMIT; ++r) {
    if (counts[r] < 0 || counts[r] > 64)
      throw Error(DLHOST_CODE_INTERNAL, runtime + ": runtime_roles asked for " +
                                            std::to_string(counts[r]) + " processes of role " +
                                            std::to_string(r) + " (0 to 64)");
    if (counts[r] > 0) out.push_back({r, counts[r]});
  }
  if (!out.empty() && ext->runtime_serve == nullptr)
    throw Error(DLHOST_CODE_INTERNAL, runtime +
                                          ": runtime_roles asked for extra roles, and the "
                                          "extension has no runtime_serve to run them");
  return out;
}

void serve_tool_runtime_role(const LoadedPlugin& backend, const std::string& runtime, int32_t role,
                             int index, int workers, const RuntimeJob& job,
                             const dlhost_options& options, double timeout_s) {
  if (auto why = tool_runtime_refusal(backend, runtime))
    throw Error(DLHOST_CODE_UNIMPLEMENTED, *why);
  const dlhost_tool_runtime_ext* ext = find_ext(backend);
  if (ext->runtime_serve == nullptr)
    throw Error(DLHOST_CODE_UNIMPLEMENTED, runtime + ": backend '" + backend.name +
                                               "' has no runtime_serve for its extra roles");
  std::vector<std::string> strings;
  const dlhost_tool_runtime_args args =
      runtime_args(runtime, role, index, workers, "127.0.0.1", job, options, timeout_s, strings);
  check_status(ext->runtime_serve(&args), runtime + ": runtime_serve");
}

ToolRuntime::ToolRuntime(const LoadedPlugin& backend, dlhost_model* model, const RankEnv& world,
                         const std::string& runtime, const dlhost_options& options,
                         double timeout_s, const RuntimeJob& job)
    : ext_(find_ext(backend)), model_(model), world_(world), runtime_(runtime) {
  if (auto why = tool_runtime_refusal(backend, runtime))
    throw Error(DLHOST_CODE_UNIMPLEMENTED, *why);
  const std::string prefix = store_prefix(runtime);
  std::vector<std::string> strings;
  const dlhost_tool_runtime_args args =
      runtime_args(runtime, DLHOST_RUNTIME_WORKER, world.rank, world.size, rank_address(world), job,
                   options, timeout_s, strings);
  if (takes_bucket_mb(runtime))
    if (auto b = options.values.find("bucket_mb"); b != options.values.end())
      bucket_mb_ = b->second;
  dlhost_tool_runtime_info info{};
  info.struct_size = DLHOST_TOOL_RUNTIME_INFO_STRUCT_SIZE;
  check_status(ext_->runtime_attach(model, &args, &info), runtime + ": runtime_attach");
  mode_ = info.mode ? info.mode : "";
  library_ = info.library ? info.library : "";
  if (info.comm_time != nullptr)
    comm_time_ = info.comm_time;
  else
    no_comm_time_ = info.no_comm_time ? info.no_comm_time : "the runtime gave no reason";
  if (mode_ != "sync" && mode_ != "async")
    throw Error(DLHOST_CODE_INTERNAL, runtime + ": mode '" + mode_ + "' is neither sync nor async");
  control_ = store_control_plane(world.rank, world.size, prefix + "control/");
}

void ToolRuntime::reduce(Samples& s) {
  s.allreduce.clear();
  if (comm_time_) {
    size_t count = 0;
    check_status(ext_->runtime_comm_times(model_, nullptr, 0, &count), runtime_ + ": comm times");
    std::vector<double> all(count);
    check_status(ext_->runtime_comm_times(model_, all.data(), all.size(), &count),
                 runtime_ + ": comm times");
    all.resize(std::min(all.size(), count));
    // The timed steps are the last ones (warm-up steps come first).
    const size_t timed = std::min(all.size(), s.step.size());
    s.allreduce.assign(all.end() - static_cast<std::ptrdiff_t>(timed), all.end());
  }
  for (auto* v : {&s.step, &s.forward, &s.backward, &s.update, &s.allreduce, &s.compute, &s.upload,
                  &s.wall_step, &s.data})
    if (!v->empty())
      control_->all_reduce(v->data(), v->size(), DLHOST_DTYPE_F64, DLHOST_REDUCE_MAX);
  if (!s.loss.empty())
    control_->all_reduce(s.loss.data(), s.loss.size(), DLHOST_DTYPE_F64, DLHOST_REDUCE_SUM);
  if (!driven_by_rank_0(runtime_))
    for (double& l : s.loss) l /= world_.size;
  // No host all-reduce, so no exposed wait of the host's own: the runtime's comm is inside
  // backward (and `allreduce` above).
  s.exposed_comm.clear();
}

record::ToolRuntimeFields ToolRuntime::describe() const {
  record::ToolRuntimeFields f{runtime_, mode_, library_, comm_time_, no_comm_time_, std::nullopt};
  if (!bucket_mb_.empty()) f.bucket_mb = std::stod(bucket_mb_);
  return f;
}

}  // namespace dlhost
