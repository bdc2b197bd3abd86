// plugin_nccl.cpp — the `nccl` comm plugin: dlhost's collectives on NCCL, one rank per GPU, on
// device memory, ordered on the stream of the rank's model (nccl_comm.h). Beyond the comm table
// it exports ABI 1.2's group calls (DLHOST_EXT_COMM_GROUP), abort (DLHOST_EXT_COMM_ABORT) and the
// options it reads (DLHOST_EXT_OPTION_SCHEMA).
//
// Loading is cheap and needs no GPU: the entry fills tables; query() asks the CUDA runtime for a
// device and says "no device: <why>" when there is none, so `dlhost plugins` lists the plugin as
// not usable with the reason and cases naming it are SKIPPED with that reason.
//
// The comm kit publishes the option schema and links the group and abort extensions through
// CommPlugin::link_extensions: one chain, one table, built by the kit.
#include "nccl_comm.h"

namespace dlhost::comm_nccl {
namespace {

class NcclPlugin final : public sdk::CommPlugin {
 public:
  sdk::CommCaps capabilities() const override {
    sdk::CommCaps caps;
    caps.host_memory = false;
    caps.device_memory = true;
    caps.dtypes = supported_dtypes();
    return caps;
  }
  std::string library() const override { return library_version(); }
  // Above mpi's 10: on a machine with GPUs, NCCL is the comm of choice for device memory.
  int32_t query() const override {
    if (const std::string why = no_device_reason(); !why.empty())
      sdk::fail(DLHOST_CODE_UNAVAILABLE, "no device: " + why);
    return 20;
  }
  std::optional<std::vector<sdk::OptionSpec>> options() const override {
    return std::vector<sdk::OptionSpec>{
        {"timeout_s", DLHOST_OPTION_FLOAT, "300",
         "seconds init, a collective or a barrier may take before the comm is aborted (a dead "
         "peer)"}};
  }
  void link_extensions(sdk::ExtensionChain& chain) const override;  // below the extensions
  std::unique_ptr<sdk::Comm> init(const dlhost_comm_init_args& args) override {
    return std::make_unique<NcclComm>(args);
  }
};

// The kit hands the host a sdk::Comm*; every comm of this plugin is an NcclComm.
NcclComm& comm_of(dlhost_comm* c, const char* call) {
  if (c == nullptr) sdk::invalid(std::string("nccl: ") + call + ": comm is NULL");
  return static_cast<NcclComm&>(*reinterpret_cast<sdk::Comm*>(c));
}

// Linked into the kit's chain (which sets `next`), so not const.
dlhost_comm_abort_ext g_abort = [] {
  auto e = sdk::make_struct<dlhost_comm_abort_ext>(DLHOST_COMM_ABORT_EXT_STRUCT_SIZE);
  e.type = DLHOST_EXT_COMM_ABORT;
  e.abort = [](dlhost_comm* c) {
    if (c == nullptr) return;
    try {
      comm_of(c, "abort").abort("aborted by the host (a peer failed or the case timed out)");
    } catch (...) {  // a C entry point: nothing escapes
    }
  };
  return e;
}();

dlhost_comm_group_ext g_group = [] {
  auto e = sdk::make_struct<dlhost_comm_group_ext>(DLHOST_COMM_GROUP_EXT_STRUCT_SIZE);
  e.type = DLHOST_EXT_COMM_GROUP;
  e.group_start = [](dlhost_comm* c) {
    return sdk::guard([&] { comm_of(c, "group_start").group_start(); });
  };
  e.group_end = [](dlhost_comm* c) {
    return sdk::guard([&] { comm_of(c, "group_end").group_end(); });
  };
  return e;
}();

void NcclPlugin::link_extensions(sdk::ExtensionChain& chain) const {
  chain.link(&g_abort);
  chain.link(&g_group);
}

}  // namespace
}  // namespace dlhost::comm_nccl

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  namespace nccl = dlhost::comm_nccl;
  return dlhost::sdk::comm_plugin<nccl::NcclPlugin>(
      host, {nccl::kName, "0.1.0", "Collectives on NCCL, one rank per GPU (device memory)"});
}
