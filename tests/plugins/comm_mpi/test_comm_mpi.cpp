// test_comm_mpi.cpp — the `mpi` and `mpi_raw` comm plugins in one process (a world of 1, MPI
// started as a singleton by the plugin): loading, capabilities, every collective and reduce op
// with exact results, asynchronous test/wait, comms created again after finalize (MPI stays up),
// bad arguments refused with INVALID_ARGUMENT, and the all-reduce algorithm MPI was started with
// (read back through MPI's tool interface, MPI_T). Multi-rank runs are the comm_mpi_*.sh tests.
// Built only where the comm_mpi plugin is (MPI installed).
#include <gtest/gtest.h>
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/host_api.h"
#include "core/plugin_registry.h"

namespace {

// Each test process gets its own Open MPI session folder. ctest runs two of these processes at
// once, and two singleton MPI_Inits racing to create /tmp/ompi.HOST.UID fail with "mkdir ...
// File exists" (seen on a fresh machine). Set before any plugin loads; a value the caller set
// wins; the folder is removed at exit.
// A plain array, not a std::string: the atexit handler runs after static destructors of
// objects constructed after its registration, which a string built here would be.
char session_base[PATH_MAX] = "";
const bool kOwnSessionBase = [] {
  if (std::getenv("OMPI_MCA_orte_tmpdir_base") != nullptr) return false;
  const std::string dir =
      (std::filesystem::temp_directory_path() / "dlhost-test-ompi-XXXXXX").string();
  if (dir.size() >= sizeof session_base) return false;
  std::strcpy(session_base, dir.c_str());
  if (mkdtemp(session_base) == nullptr) return false;
  setenv("OMPI_MCA_orte_tmpdir_base", session_base, 0);
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(session_base, ignored);
  });
  return true;
}();

// Whether whoever runs the test chose libnbc's all-reduce algorithm: read before any plugin can
// start MPI (and set it).
const bool kUserChoseIallreduceAlgorithm =
    std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") != nullptr;

// libnbc's MPI_Iallreduce algorithm as MPI itself reports it (its MPI_T control variable
// coll_libnbc_iallreduce_algorithm: 0 its own choice, 1 ring, 2 binomial, 3 Rabenseifner, 4
// recursive doubling), or -1 with the reason in *why.
int libnbc_iallreduce_algorithm(std::string* why) {
  int provided = 0;  // the plugins' level: asking less would lower what MPI_Query_thread says
  if (MPI_T_init_thread(MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    *why = "MPI_T_init_thread failed";
    return -1;
  }
  int index = -1, count = 0, value = -1;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS)
    *why = "MPI has no control variable coll_libnbc_iallreduce_algorithm (not Open MPI 4.x?)";
  else if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS || count != 1)
    *why = "MPI_T_cvar_handle_alloc failed";
  else if (MPI_T_cvar_read(handle, &value) != MPI_SUCCESS)
    *why = "MPI_T_cvar_read failed";
  if (handle != MPI_T_CVAR_HANDLE_NULL) MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  return value;
}

using dlhost::StatusPtr;

const char* kPluginDir = DLHOST_TEST_PLUGIN_DIR;

// The code of a status (OK for NULL); releases it.
int32_t code_of(dlhost_status* s, std::string* message = nullptr) {
  StatusPtr owned(s);
  if (!owned) return DLHOST_CODE_OK;
  if (message != nullptr) *message = owned->message;
  return owned->code;
}

dlhost_comm_init_args world_of_one() {
  dlhost_comm_init_args a{};
  a.struct_size = DLHOST_COMM_INIT_ARGS_STRUCT_SIZE;
  a.rank = 0;
  a.world_size = 1;
  a.local_rank = 0;
  a.local_size = 1;
  a.device = -1;
  return a;
}

// Loads one plugin library and keeps its comm table; parameterized over both plugins.
class CommMpi : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string file = GetParam() == "mpi" ? "libdlhost_comm_mpi.so" : "libdlhost_comm_mpi_raw.so";
    ASSERT_TRUE(registry.load_file(std::string(kPluginDir) + "/" + file))
        << (registry.refused().empty() ? "" : registry.refused().back().reason);
    plugin = registry.find(DLHOST_PLUGIN_COMM, GetParam());
    ASSERT_NE(plugin, nullptr);
    api = plugin->table->comm;
  }
  void TearDown() override {
    if (comm != nullptr) api->finalize(comm);
  }
  void init_world_of_one() {
    auto args = world_of_one();
    ASSERT_EQ(code_of(api->init(&args, &comm)), DLHOST_CODE_OK);
    ASSERT_NE(comm, nullptr);
  }
  // Issues through `issue`, waits, frees; returns the wait's code.
  template <class Issue>
  int32_t run(Issue&& issue, std::string* message = nullptr) {
    dlhost_request* r = nullptr;
    int32_t code = code_of(issue(&r), message);
    if (code != DLHOST_CODE_OK) return code;
    EXPECT_NE(r, nullptr);
    code = code_of(api->wait(r), message);
    api->request_free(r);
    return code;
  }

  dlhost::PluginRegistry registry;
  const dlhost::LoadedPlugin* plugin = nullptr;
  const dlhost_comm_api* api = nullptr;
  dlhost_comm* comm = nullptr;
};

TEST_P(CommMpi, LoadsAsUsableCommPlugin) {
  EXPECT_EQ(plugin->kind, DLHOST_PLUGIN_COMM);
  EXPECT_TRUE(plugin->usable) << plugin->unusable_reason;
  EXPECT_GE(api->struct_size, DLHOST_COMM_API_STRUCT_SIZE);
  // `mpi` outranks its baseline when a suite lets the host choose.
  EXPECT_EQ(plugin->priority, GetParam() == "mpi" ? 10 : 0);
}

TEST_P(CommMpi, CapabilitiesAreHonest) {
  // The caller says how much of the struct it has (ABI rule 3), as the host does.
  dlhost_comm_caps caps{};
  caps.struct_size = DLHOST_COMM_CAPS_STRUCT_SIZE;
  ASSERT_EQ(code_of(api->capabilities(&caps)), DLHOST_CODE_OK);
  EXPECT_EQ(caps.host_memory, 1);
  EXPECT_EQ(caps.device_memory, 0);  // Debian's Open MPI is not CUDA-aware
  for (int32_t d : {DLHOST_DTYPE_F32, DLHOST_DTYPE_F64, DLHOST_DTYPE_I32, DLHOST_DTYPE_I64})
    EXPECT_TRUE((caps.dtypes >> d) & 1u) << d;
  for (int32_t d : {DLHOST_DTYPE_F16, DLHOST_DTYPE_BF16})
    EXPECT_FALSE((caps.dtypes >> d) & 1u) << d;
  ASSERT_NE(caps.library, nullptr);
  EXPECT_EQ(std::string(caps.library).rfind("Open MPI v", 0), 0u) << caps.library;
  EXPECT_EQ(std::string(caps.library).find('\n'), std::string::npos);
}

TEST_P(CommMpi, AllReduceEveryOpOnOneRank) {
  init_world_of_one();
  for (int32_t op : {DLHOST_REDUCE_SUM, DLHOST_REDUCE_AVG, DLHOST_REDUCE_MAX, DLHOST_REDUCE_MIN}) {
    std::vector<float> in{1.5f, -2.0f, 3.25f}, out(3, 0.0f);
    EXPECT_EQ(run([&](dlhost_request** r) {
                return api->all_reduce(comm, in.data(), out.data(), 3, DLHOST_DTYPE_F32, op,
                                       DLHOST_MEMORY_HOST, r);
              }),
              DLHOST_CODE_OK);
    EXPECT_EQ(out, in) << "op " << op;  // one rank: every op is the identity
  }
  // In place, 64-bit integers.
  std::vector<int64_t> x{1, -(int64_t{1} << 40), 7};
  std::vector<int64_t> expect = x;
  EXPECT_EQ(run([&](dlhost_request** r) {
              return api->all_reduce(comm, x.data(), x.data(), 3, DLHOST_DTYPE_I64,
                                     DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST, r);
            }),
            DLHOST_CODE_OK);
  EXPECT_EQ(x, expect);
}

TEST_P(CommMpi, BroadcastAllGatherBarrierOnOneRank) {
  init_world_of_one();
  std::vector<double> b{1.0, 2.0, 3.0};
  EXPECT_EQ(run([&](dlhost_request** r) {
              return api->broadcast(comm, b.data(), 3, DLHOST_DTYPE_F64, 0, DLHOST_MEMORY_HOST, r);
            }),
            DLHOST_CODE_OK);
  EXPECT_EQ(b, (std::vector<double>{1.0, 2.0, 3.0}));

  std::vector<int32_t> send{4, 5}, recv(2, 0);
  EXPECT_EQ(run([&](dlhost_request** r) {
              return api->all_gather(comm, send.data(), recv.data(), 2, DLHOST_DTYPE_I32,
                                     DLHOST_MEMORY_HOST, r);
            }),
            DLHOST_CODE_OK);
  EXPECT_EQ(recv, send);
  // In place: the rank's block already at its slot.
  EXPECT_EQ(run([&](dlhost_request** r) {
              return api->all_gather(comm, recv.data(), recv.data(), 2, DLHOST_DTYPE_I32,
                                     DLHOST_MEMORY_HOST, r);
            }),
            DLHOST_CODE_OK);
  EXPECT_EQ(recv, send);

  EXPECT_EQ(run([&](dlhost_request** r) { return api->barrier(comm, r); }), DLHOST_CODE_OK);
}

TEST_P(CommMpi, TestPollsUntilDoneThenWaitIsANoOp) {
  init_world_of_one();
  std::vector<float> in(1 << 16, 2.0f), out(1 << 16, 0.0f);
  dlhost_request* r = nullptr;
  ASSERT_EQ(code_of(api->all_reduce(comm, in.data(), out.data(), in.size(), DLHOST_DTYPE_F32,
                                    DLHOST_REDUCE_AVG, DLHOST_MEMORY_HOST, &r)),
            DLHOST_CODE_OK);
  int32_t done = 0;
  for (int i = 0; i < 1000000 && !done; ++i)
    ASSERT_EQ(code_of(api->test(r, &done)), DLHOST_CODE_OK);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(out[0], 2.0f);  // AVG over one rank, applied exactly once
  EXPECT_EQ(out.back(), 2.0f);
  EXPECT_EQ(code_of(api->wait(r)), DLHOST_CODE_OK);
  EXPECT_EQ(code_of(api->test(r, &done)), DLHOST_CODE_OK);
  EXPECT_EQ(out[0], 2.0f);
  api->request_free(r);
  api->request_free(nullptr);  // accepts NULL
  api->finalize(nullptr);
}

TEST_P(CommMpi, RequestFreedBeforeCompletionIsWaitedFor) {
  init_world_of_one();
  std::vector<int32_t> in(1024, 3), out(1024, 0);
  dlhost_request* r = nullptr;
  ASSERT_EQ(code_of(api->all_reduce(comm, in.data(), out.data(), in.size(), DLHOST_DTYPE_I32,
                                    DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST, &r)),
            DLHOST_CODE_OK);
  api->request_free(r);
  EXPECT_EQ(out[1023], 3);
}

TEST_P(CommMpi, CommsComeAndGoWhileMpiStaysUp) {
  for (int i = 0; i < 3; ++i) {
    init_world_of_one();
    EXPECT_EQ(run([&](dlhost_request** r) { return api->barrier(comm, r); }), DLHOST_CODE_OK);
    api->finalize(comm);
    comm = nullptr;
  }
  // Two comms at once, each on its own communicator.
  auto args = world_of_one();
  dlhost_comm* a = nullptr;
  dlhost_comm* b = nullptr;
  ASSERT_EQ(code_of(api->init(&args, &a)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(api->init(&args, &b)), DLHOST_CODE_OK);
  EXPECT_NE(a, b);
  api->finalize(a);
  api->finalize(b);
}

// The `mpi` comm's all-reduce is MPI_Iallreduce, which Open MPI 4.1 serves with libnbc, whose own
// choice for an in-place call (data parallelism's) or fewer than 4 ranks is a binomial reduce to
// rank 0 then a binomial broadcast: on a link, 2x the ring's time at 2 ranks
// (docs/comm-bench.md). Whichever plugin starts MPI selects libnbc's ring.
TEST_P(CommMpi, StartsMpiWithLibnbcsRingAllReduce) {
  if (kUserChoseIallreduceAlgorithm)
    GTEST_SKIP() << "OMPI_MCA_coll_libnbc_iallreduce_algorithm is set in the environment: the "
                    "plugin keeps the user's choice";
  init_world_of_one();
  std::string why;
  const int algorithm = libnbc_iallreduce_algorithm(&why);
  ASSERT_GE(algorithm, 0) << why;
  EXPECT_EQ(algorithm, 1) << "libnbc's iallreduce algorithm: 0 = libnbc's own choice (binomial "
                             "in place or below 4 ranks), 1 = ring";
}

TEST_P(CommMpi, InitRefusesAWorldMpiDoesNotHave) {
  auto args = world_of_one();
  args.world_size = 2;
  std::string message;
  EXPECT_EQ(code_of(api->init(&args, &comm), &message), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(message.find("host says rank 0 of 2"), std::string::npos) << message;
  EXPECT_NE(message.find("MPI says rank 0 of 1"), std::string::npos) << message;

  args = world_of_one();
  args.rank = 1;
  EXPECT_EQ(code_of(api->init(&args, &comm)), DLHOST_CODE_INVALID_ARGUMENT);
  args = world_of_one();
  args.struct_size = 8;
  EXPECT_EQ(code_of(api->init(&args, &comm)), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(api->init(nullptr, &comm)), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
}

TEST_P(CommMpi, BadCollectiveArgumentsAreRefused) {
  init_world_of_one();
  float x[4] = {1, 2, 3, 4};
  dlhost_request* r = nullptr;
  auto reduce = [&](const void* s, void* d, uint64_t n, int32_t dtype, int32_t op, int32_t space,
                    dlhost_request** req, std::string* msg = nullptr) {
    return code_of(api->all_reduce(comm, s, d, n, dtype, op, space, req), msg);
  };
  std::string message;
  EXPECT_EQ(reduce(x, x, 4, 99, DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST, &r, &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("unknown dtype 99"), std::string::npos) << message;
  EXPECT_EQ(reduce(x, x, 4, DLHOST_DTYPE_F16, DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST, &r, &message),
            DLHOST_CODE_UNIMPLEMENTED);
  EXPECT_NE(message.find("16-bit"), std::string::npos) << message;
  EXPECT_EQ(reduce(x, x, 4, DLHOST_DTYPE_F32, 42, DLHOST_MEMORY_HOST, &r),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(
      reduce(x, x, 4, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM, DLHOST_MEMORY_DEVICE, &r, &message),
      DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("not CUDA-aware"), std::string::npos) << message;
  EXPECT_EQ(reduce(x, x, 4, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM, 7, &r),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(reduce(nullptr, x, 4, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST, &r),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(reduce(x, x, uint64_t{INT_MAX} + 1, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM,
                   DLHOST_MEMORY_HOST, &r),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(reduce(x, x, 4, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST, nullptr),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);  // out-parameters untouched on error
  EXPECT_EQ(code_of(api->all_reduce(nullptr, x, x, 4, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM,
                                    DLHOST_MEMORY_HOST, &r)),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(
      code_of(api->broadcast(comm, x, 4, DLHOST_DTYPE_F32, 1, DLHOST_MEMORY_HOST, &r), &message),
      DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("root 1"), std::string::npos) << message;
  EXPECT_EQ(code_of(api->all_gather(comm, x, nullptr, 4, DLHOST_DTYPE_F32, DLHOST_MEMORY_HOST, &r)),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(api->barrier(comm, nullptr)), DLHOST_CODE_INVALID_ARGUMENT);
  int32_t done = 0;
  EXPECT_EQ(code_of(api->test(nullptr, &done)), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(api->wait(nullptr)), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(api->capabilities(nullptr)), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
}

INSTANTIATE_TEST_SUITE_P(Plugins, CommMpi, ::testing::Values("mpi", "mpi_raw"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
