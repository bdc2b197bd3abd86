// test_comm_nccl.cpp — the `nccl` comm plugin. Without a GPU (this machine): the library loads,
// describes itself (device memory, bf16/fp16, NCCL's version), exports group, abort and its
// option schema, is reported not usable with the reason, refuses an init without a CUDA stream
// or device with a clear message, and exchanges NCCL's unique id through the host's store. With
// GPUs: every collective and reduce op on device memory ordered on a stream, group calls,
// barrier, abort, a peer that never joins (init ends with DEADLINE_EXCEEDED instead of hanging),
// and on 2 devices two ranks in two threads. GPU cases skip with the reason where there is none.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/host_api.h"
#include "core/plugin_extensions.h"
#include "core/plugin_registry.h"
#include "nccl_bootstrap.h"
#include "nccl_support.h"

namespace {

using dlhost::StatusPtr;
namespace nccl = dlhost::comm_nccl;

// DLHOST_NCCL_PLUGIN overrides the build's path: scripts/gpu-check.sh runs this test from a bundle
// carried to the GPU machine, where the build folder does not exist.
const std::string kLibrary = std::getenv("DLHOST_NCCL_PLUGIN") != nullptr
                                 ? std::getenv("DLHOST_NCCL_PLUGIN")
                                 : std::string(DLHOST_TEST_PLUGIN_DIR) + "/libdlhost_comm_nccl.so";

int32_t code_of(dlhost_status* s, std::string* message = nullptr) {
  StatusPtr owned(s);
  if (!owned) return DLHOST_CODE_OK;
  if (message != nullptr) *message = owned->message;
  return owned->code;
}

int gpus() {
  int n = 0;  // left unwritten without a driver
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

dlhost_comm_init_args args_for(int32_t rank, int32_t world, const dlhost_extension* ext) {
  dlhost_comm_init_args a{};
  a.struct_size = DLHOST_COMM_INIT_ARGS_STRUCT_SIZE;
  a.rank = rank;
  a.world_size = world;
  a.local_rank = rank;
  a.local_size = world;
  a.device = -1;
  a.extensions = ext;
  a.store_prefix = "test/";
  return a;
}

dlhost_comm_stream_ext cuda_stream(cudaStream_t s, int device) {
  dlhost_comm_stream_ext e{};
  e.struct_size = DLHOST_COMM_STREAM_EXT_STRUCT_SIZE;
  e.type = DLHOST_EXT_COMM_STREAM;
  e.stream.struct_size = DLHOST_STREAM_STRUCT_SIZE;
  e.stream.kind = DLHOST_STREAM_CUDA;
  e.stream.device = device;
  e.stream.handle = s;
  return e;
}

class NcclPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(registry.load_file(kLibrary))
        << (registry.refused().empty() ? "" : registry.refused().back().reason);
    plugin = registry.find(DLHOST_PLUGIN_COMM, "nccl");
    ASSERT_NE(plugin, nullptr);
    api = plugin->table->comm;
    ext = dlhost::resolve_extensions(*plugin->table);
    dlhost::reset_store();
  }
  // init's status code; the message in *message. Finalizes a comm that was made.
  int32_t init_code(const dlhost_comm_init_args& a, std::string* message) {
    dlhost_comm* c = nullptr;
    const int32_t code = code_of(api->init(&a, &c), message);
    if (c != nullptr) api->finalize(c);
    return code;
  }

  dlhost::PluginRegistry registry;
  const dlhost::LoadedPlugin* plugin = nullptr;
  const dlhost_comm_api* api = nullptr;
  dlhost::PluginExtensions ext;
};

TEST_F(NcclPlugin, DescribesItselfAsADeviceMemoryComm) {
  EXPECT_EQ(plugin->abi_major, 1u);
  EXPECT_EQ(plugin->abi_minor, static_cast<uint32_t>(DLHOST_ABI_MINOR));
  dlhost_comm_caps caps{};
  caps.struct_size = DLHOST_COMM_CAPS_STRUCT_SIZE;
  ASSERT_EQ(code_of(api->capabilities(&caps)), DLHOST_CODE_OK);
  EXPECT_EQ(caps.device_memory, 1);
  EXPECT_EQ(caps.host_memory, 0);
  for (int32_t t : {DLHOST_DTYPE_F32, DLHOST_DTYPE_F64, DLHOST_DTYPE_I32, DLHOST_DTYPE_I64,
                    DLHOST_DTYPE_F16, DLHOST_DTYPE_BF16})
    EXPECT_TRUE((caps.dtypes >> t) & 1u) << "dtype " << t;
  ASSERT_NE(caps.library, nullptr);
  EXPECT_EQ(std::string(caps.library).rfind("NCCL 2.", 0), 0u) << caps.library;
}

TEST_F(NcclPlugin, ExportsGroupAbortAndItsOptions) {
  ASSERT_NE(ext.group, nullptr);
  ASSERT_NE(ext.abort, nullptr);
  const auto options = dlhost::declared_options(ext);
  ASSERT_EQ(options.size(), 1u);
  EXPECT_EQ(options[0].name, "timeout_s");
  EXPECT_EQ(options[0].type, DLHOST_OPTION_FLOAT);
  EXPECT_TRUE(dlhost::check_options("nccl", options, {{"timeout_sec", "3"}}).has_value());
}

TEST_F(NcclPlugin, UsableExactlyWhenTheRuntimeSeesADevice) {
  if (gpus() > 0) {
    EXPECT_TRUE(plugin->usable) << plugin->unusable_reason;
    EXPECT_EQ(plugin->priority, 20);
  } else {
    EXPECT_FALSE(plugin->usable);
    EXPECT_EQ(plugin->unusable_reason.rfind("no device: ", 0), 0u) << plugin->unusable_reason;
    EXPECT_EQ(plugin->unusable_reason, "no device: " + nccl::no_device_reason());
  }
}

TEST_F(NcclPlugin, InitWithoutAStreamIsRefusedWithTheReason) {
  std::string message;
  EXPECT_EQ(init_code(args_for(0, 1, nullptr), &message), DLHOST_CODE_FAILED_PRECONDITION);
  EXPECT_NE(message.find("no CUDA stream"), std::string::npos) << message;
  EXPECT_NE(message.find("comm: mpi"), std::string::npos) << message;
}

TEST_F(NcclPlugin, InitOnAHostQueueIsRefused) {
  auto e = cuda_stream(nullptr, 0);
  e.stream.kind = DLHOST_STREAM_HOST_QUEUE;
  std::string message;
  EXPECT_EQ(init_code(args_for(0, 1, reinterpret_cast<dlhost_extension*>(&e)), &message),
            DLHOST_CODE_FAILED_PRECONDITION);
  EXPECT_NE(message.find("host queue"), std::string::npos) << message;
}

TEST_F(NcclPlugin, InitOutsideItsWorldIsInvalid) {
  auto e = cuda_stream(nullptr, 0);
  std::string message;
  EXPECT_EQ(init_code(args_for(2, 2, reinterpret_cast<dlhost_extension*>(&e)), &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("rank 2 is not in a world of 2"), std::string::npos) << message;
}

TEST_F(NcclPlugin, BadTimeoutOptionIsInvalid) {
  auto e = cuda_stream(nullptr, 0);
  dlhost_options options;
  options.values["timeout_s"] = "soon";
  auto a = args_for(0, 1, reinterpret_cast<dlhost_extension*>(&e));
  a.options = &options;
  std::string message;
  EXPECT_EQ(init_code(a, &message), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("timeout_s"), std::string::npos) << message;
}

TEST_F(NcclPlugin, InitWithoutADeviceSaysNoDevice) {
  if (gpus() > 0) GTEST_SKIP() << "this machine has a CUDA device; the no-device path needs none";
  auto e = cuda_stream(nullptr, 0);
  std::string message;
  EXPECT_EQ(init_code(args_for(0, 1, reinterpret_cast<dlhost_extension*>(&e)), &message),
            DLHOST_CODE_UNAVAILABLE);
  EXPECT_NE(message.find("no device: cudaGetDeviceCount"), std::string::npos) << message;
}

TEST_F(NcclPlugin, NullCommsAreInvalidEverywhere) {
  std::string message;
  EXPECT_EQ(code_of(ext.group->group_start(nullptr), &message), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("group_start"), std::string::npos);
  EXPECT_EQ(code_of(ext.group->group_end(nullptr)), DLHOST_CODE_INVALID_ARGUMENT);
  ext.abort->abort(nullptr);  // must simply return
  dlhost_request* r = nullptr;
  EXPECT_EQ(code_of(api->barrier(nullptr, &r)), DLHOST_CODE_INVALID_ARGUMENT);
  api->finalize(nullptr);
}

// --- what the plugin is made of, without a GPU
// ----------------------------------------------------

class NcclBootstrap : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dlhost::sdk::attach_host(dlhost::host_api(), "nccl"));
    dlhost::reset_store();
  }
};

TEST_F(NcclBootstrap, RanksReadTheIdRankZeroPublished) {
  const std::string key = nccl::unique_id_key("case/comm0/");
  EXPECT_EQ(key, "case/comm0/nccl/unique_id");
  const ncclUniqueId made = nccl::exchange_unique_id(key, 0, 1000);
  ncclUniqueId read{};
  std::thread peer([&] { read = nccl::exchange_unique_id(key, 1, 5000); });
  peer.join();
  EXPECT_EQ(std::memcmp(&made, &read, sizeof(made)), 0);
  try {
    nccl::exchange_unique_id(key, 0, 1000);
    FAIL() << "a second rank 0 published at the same key";
  } catch (const dlhost::sdk::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_ALREADY_EXISTS) << e.what();
  }
}

TEST_F(NcclBootstrap, AMissingRankZeroEndsInDeadlineNamingTheKey) {
  try {
    nccl::exchange_unique_id("lonely/nccl/unique_id", 3, 20);
    FAIL() << "no rank 0, yet the id was read";
  } catch (const dlhost::sdk::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_DEADLINE_EXCEEDED);
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 3 reading the unique id at lonely/nccl/unique_id"), std::string::npos)
        << what;
    EXPECT_NE(what.find("is rank 0 alive"), std::string::npos) << what;
  }
}

TEST_F(NcclBootstrap, AValueThatIsNotAnIdIsDataLoss) {
  ASSERT_EQ(code_of(dlhost::host_api()->store_set("odd/nccl/unique_id", "abc", 3)), 0);
  try {
    nccl::exchange_unique_id("odd/nccl/unique_id", 1, 1000);
    FAIL() << "3 bytes taken for an id";
  } catch (const dlhost::sdk::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_DATA_LOSS) << e.what();
  }
}

TEST_F(NcclBootstrap, WithoutAPrefixEachCommGetsItsOwnKey) {
  const std::string a = nccl::unique_id_key(""), b = nccl::unique_id_key("");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("nccl/", 0), 0u);
}

TEST(NcclSupport, MapsDtypesAndOpsAndRefusesUnknownOnes) {
  EXPECT_EQ(nccl::nccl_dtype(DLHOST_DTYPE_BF16, "t"), ncclBfloat16);
  EXPECT_EQ(nccl::nccl_dtype(DLHOST_DTYPE_F16, "t"), ncclFloat16);
  EXPECT_EQ(nccl::dtype_bytes(DLHOST_DTYPE_BF16), 2u);
  EXPECT_EQ(nccl::dtype_bytes(DLHOST_DTYPE_I64), 8u);
  EXPECT_EQ(nccl::nccl_op(DLHOST_REDUCE_AVG, "t"), ncclAvg);
  EXPECT_EQ(nccl::nccl_op(DLHOST_REDUCE_MIN, "t"), ncclMin);
  EXPECT_THROW(nccl::nccl_dtype(99, "t"), dlhost::sdk::Error);
  EXPECT_THROW(nccl::nccl_op(0, "t"), dlhost::sdk::Error);
  EXPECT_EQ(nccl::code_of(ncclRemoteError), DLHOST_CODE_ABORTED);
  EXPECT_EQ(nccl::code_of(ncclInvalidUsage), DLHOST_CODE_INVALID_ARGUMENT);
}

TEST(NcclSupport, AbortedPollStopsWithTheReason) {
  std::atomic<bool> aborted{true};
  try {
    nccl::poll_until([] { return false; }, "all_reduce", std::chrono::seconds(60), aborted,
                     [] { return std::string("peer 1 died"); }, "");
    FAIL();
  } catch (const dlhost::sdk::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_ABORTED);
    EXPECT_STREQ(e.what(), "nccl: all_reduce: peer 1 died");
  }
  aborted = false;
  try {
    nccl::poll_until([] { return false; }, "init", std::chrono::milliseconds(5), aborted,
                     [] { return std::string(); }, " (hint)");
    FAIL();
  } catch (const dlhost::sdk::Error& e) {
    EXPECT_EQ(e.code(), DLHOST_CODE_DEADLINE_EXCEEDED);
    EXPECT_STREQ(e.what(), "nccl: init did not finish within 0.005 s (hint)");
  }
}

}  // namespace
