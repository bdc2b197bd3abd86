// test_comm_nccl_gpu.cpp — the `nccl` plugin on real GPUs (part of test_comm_nccl): collectives
// on device memory ordered on the model's stream, group calls, barrier, abort, a peer that never
// joins, and two ranks on two devices in two threads. Every case skips with the reason on a
// machine without the devices it needs; nothing here passes without running.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/host_api.h"
#include "core/plugin_extensions.h"
#include "core/plugin_registry.h"
#include "nccl_support.h"

namespace {

using dlhost::StatusPtr;

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

#define NEED_GPUS(n)                                                                            \
  do {                                                                                          \
    if (gpus() < (n))                                                                           \
      GTEST_SKIP() << "needs " << (n) << " CUDA device(s); this machine has " << gpus() << " (" \
                   << dlhost::comm_nccl::no_device_reason() << ")";                             \
  } while (0)

// One rank: a device, a stream (the model's, as a backend would hand it over) and its comm.
struct Rank {
  int device = 0;
  cudaStream_t stream = nullptr;
  dlhost_comm_stream_ext ext{};
  dlhost_comm* comm = nullptr;
  dlhost_options options;

  explicit Rank(int d) : device(d) {
    cudaSetDevice(d);
    cudaStreamCreate(&stream);
    ext.struct_size = DLHOST_COMM_STREAM_EXT_STRUCT_SIZE;
    ext.type = DLHOST_EXT_COMM_STREAM;
    ext.stream = {DLHOST_STREAM_STRUCT_SIZE, DLHOST_STREAM_CUDA, d, stream};
  }
  ~Rank() { cudaStreamDestroy(stream); }
  // `local` ranks share this node (one GPU each); the rest are elsewhere.
  int32_t init(const dlhost_comm_api* api, int32_t rank, int32_t world, const std::string& prefix,
               std::string* message = nullptr, int32_t local = -1) {
    cudaSetDevice(device);
    dlhost_comm_init_args a{};
    a.struct_size = DLHOST_COMM_INIT_ARGS_STRUCT_SIZE;
    a.rank = rank;
    a.world_size = world;
    a.local_size = local < 0 ? world : local;
    a.local_rank = rank % a.local_size;
    a.device = device;
    a.options = &options;
    a.extensions = reinterpret_cast<const dlhost_extension*>(&ext);
    a.store_prefix = prefix.c_str();
    return code_of(api->init(&a, &comm), message);
  }
};

// A device buffer of `n` elements of T, filled from and read back to the host on a stream.
template <class T>
struct DeviceArray {
  T* data = nullptr;
  size_t n;
  explicit DeviceArray(size_t count) : n(count) {
    cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(T));
  }
  ~DeviceArray() { cudaFree(data); }
  void put(const std::vector<T>& v, cudaStream_t s) {
    cudaMemcpyAsync(data, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, s);
  }
  std::vector<T> get(cudaStream_t s) const {
    std::vector<T> v(n);
    cudaMemcpyAsync(v.data(), data, n * sizeof(T), cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    return v;
  }
};

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(registry.load_file(kLibrary));
    const dlhost::LoadedPlugin* p = registry.find(DLHOST_PLUGIN_COMM, "nccl");
    ASSERT_NE(p, nullptr);
    api = p->table->comm;
    ext = dlhost::resolve_extensions(*p->table);
    dlhost::reset_store();
  }
  // Issues, waits and frees; the code of the first failure.
  template <class Issue>
  int32_t run(Issue&& issue, std::string* message = nullptr) {
    dlhost_request* r = nullptr;
    int32_t code = code_of(issue(&r), message);
    if (code != DLHOST_CODE_OK) return code;
    code = code_of(api->wait(r), message);
    api->request_free(r);
    return code;
  }

  dlhost::PluginRegistry registry;
  const dlhost_comm_api* api = nullptr;
  dlhost::PluginExtensions ext;
};

TEST_F(NcclGpu, WorldOfOneRunsEveryCollectiveOnTheStream) {
  NEED_GPUS(1);
  Rank r(0);
  ASSERT_EQ(r.init(api, 0, 1, "one/"), DLHOST_CODE_OK);
  const std::vector<float> x = {1.5f, -2.0f, 3.25f, 1e6f};
  DeviceArray<float> send(4), recv(4);
  send.put(x, r.stream);
  for (int32_t op : {DLHOST_REDUCE_SUM, DLHOST_REDUCE_AVG, DLHOST_REDUCE_MAX, DLHOST_REDUCE_MIN}) {
    recv.put({0, 0, 0, 0}, r.stream);
    ASSERT_EQ(run([&](dlhost_request** q) {
                return api->all_reduce(r.comm, send.data, recv.data, 4, DLHOST_DTYPE_F32, op,
                                       DLHOST_MEMORY_DEVICE, q);
              }),
              DLHOST_CODE_OK);
    EXPECT_EQ(recv.get(r.stream), x) << "op " << op;  // a world of 1: the input itself
  }
  // bf16 and fp16 in place: the bits come back unchanged (sum over one rank).
  DeviceArray<uint16_t> half(3);
  const std::vector<uint16_t> bits = {0x3f80, 0xc000, 0x4049};
  half.put(bits, r.stream);
  for (int32_t dtype : {DLHOST_DTYPE_BF16, DLHOST_DTYPE_F16})
    ASSERT_EQ(run([&](dlhost_request** q) {
                return api->all_reduce(r.comm, half.data, half.data, 3, dtype, DLHOST_REDUCE_SUM,
                                       DLHOST_MEMORY_DEVICE, q);
              }),
              DLHOST_CODE_OK);
  EXPECT_EQ(half.get(r.stream), bits);
  ASSERT_EQ(run([&](dlhost_request** q) {
              return api->broadcast(r.comm, send.data, 4, DLHOST_DTYPE_F32, 0, DLHOST_MEMORY_DEVICE,
                                    q);
            }),
            DLHOST_CODE_OK);
  recv.put({0, 0, 0, 0}, r.stream);
  ASSERT_EQ(run([&](dlhost_request** q) {
              return api->all_gather(r.comm, send.data, recv.data, 4, DLHOST_DTYPE_F32,
                                     DLHOST_MEMORY_DEVICE, q);
            }),
            DLHOST_CODE_OK);
  EXPECT_EQ(recv.get(r.stream), x);
  std::string message;
  EXPECT_EQ(run(
                [&](dlhost_request** q) {
                  return api->all_reduce(r.comm, x.data(), recv.data, 4, DLHOST_DTYPE_F32,
                                         DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST, q);
                },
                &message),
            DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("device memory only"), std::string::npos) << message;
  ASSERT_EQ(run([&](dlhost_request** q) { return api->barrier(r.comm, q); }), DLHOST_CODE_OK);
  api->finalize(r.comm);
}

TEST_F(NcclGpu, GroupRequestsCompleteAtTheGroupsEnd) {
  NEED_GPUS(1);
  Rank r(0);
  ASSERT_EQ(r.init(api, 0, 1, "group/"), DLHOST_CODE_OK);
  DeviceArray<int32_t> a(2), b(2);
  a.put({7, 8}, r.stream);
  b.put({0, 0}, r.stream);
  ASSERT_EQ(code_of(ext.group->group_start(r.comm)), DLHOST_CODE_OK);
  dlhost_request *q1 = nullptr, *q2 = nullptr;
  ASSERT_EQ(code_of(api->all_reduce(r.comm, a.data, b.data, 2, DLHOST_DTYPE_I32, DLHOST_REDUCE_MAX,
                                    DLHOST_MEMORY_DEVICE, &q1)),
            DLHOST_CODE_OK);
  ASSERT_EQ(
      code_of(api->broadcast(r.comm, a.data, 2, DLHOST_DTYPE_I32, 0, DLHOST_MEMORY_DEVICE, &q2)),
      DLHOST_CODE_OK);
  int32_t done = 1;
  ASSERT_EQ(code_of(api->test(q1, &done)), DLHOST_CODE_OK);
  EXPECT_EQ(done, 0) << "a request of an open group reported complete";
  EXPECT_EQ(code_of(api->wait(q1)), DLHOST_CODE_FAILED_PRECONDITION);
  dlhost_request* b_req = nullptr;
  EXPECT_EQ(code_of(api->barrier(r.comm, &b_req)), DLHOST_CODE_FAILED_PRECONDITION);
  ASSERT_EQ(code_of(ext.group->group_end(r.comm)), DLHOST_CODE_OK);
  ASSERT_EQ(code_of(api->test(q1, &done)), DLHOST_CODE_OK);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(code_of(api->wait(q2)), DLHOST_CODE_OK);
  api->request_free(q1);
  api->request_free(q2);
  EXPECT_EQ(b.get(r.stream), (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(code_of(ext.group->group_end(r.comm)), DLHOST_CODE_FAILED_PRECONDITION);
  api->finalize(r.comm);
}

TEST_F(NcclGpu, AbortEndsTheCommWithAborted) {
  NEED_GPUS(1);
  Rank r(0);
  ASSERT_EQ(r.init(api, 0, 1, "abort/"), DLHOST_CODE_OK);
  DeviceArray<float> a(1);
  ext.abort->abort(r.comm);
  std::string message;
  EXPECT_EQ(run(
                [&](dlhost_request** q) {
                  return api->all_reduce(r.comm, a.data, a.data, 1, DLHOST_DTYPE_F32,
                                         DLHOST_REDUCE_SUM, DLHOST_MEMORY_DEVICE, q);
                },
                &message),
            DLHOST_CODE_ABORTED);
  EXPECT_NE(message.find("aborted by the host"), std::string::npos) << message;
  api->finalize(r.comm);
}

TEST_F(NcclGpu, APeerThatNeverJoinsEndsInitInsteadOfHanging) {
  NEED_GPUS(1);
  Rank r(0);
  r.options.values["timeout_s"] = "3";
  std::string message;
  // Rank 1 would be on another node, which never starts.
  EXPECT_EQ(r.init(api, 0, 2, "alone/", &message, 1), DLHOST_CODE_DEADLINE_EXCEEDED) << message;
  EXPECT_NE(message.find("did not finish within 3 s"), std::string::npos) << message;
}

TEST_F(NcclGpu, TwoRanksOnTwoDevicesAgree) {
  NEED_GPUS(2);
  std::vector<std::vector<float>> sums(2), gathered(2), cast(2);
  std::vector<int32_t> codes(2, -1);
  auto rank = [&](int id) {
    Rank r(id);
    codes[id] = r.init(api, id, 2, "two/");
    if (codes[id] != DLHOST_CODE_OK) return;
    DeviceArray<float> x(2), all(4);
    x.put({1.0f + id, 10.0f * (id + 1)}, r.stream);
    codes[id] = run([&](dlhost_request** q) {
      return api->all_reduce(r.comm, x.data, x.data, 2, DLHOST_DTYPE_F32, DLHOST_REDUCE_AVG,
                             DLHOST_MEMORY_DEVICE, q);
    });
    sums[id] = x.get(r.stream);
    codes[id] |= run([&](dlhost_request** q) {
      return api->all_gather(r.comm, x.data, all.data, 2, DLHOST_DTYPE_F32, DLHOST_MEMORY_DEVICE,
                             q);
    });
    gathered[id] = all.get(r.stream);
    x.put({static_cast<float>(id), static_cast<float>(id)}, r.stream);
    codes[id] |= run([&](dlhost_request** q) {
      return api->broadcast(r.comm, x.data, 2, DLHOST_DTYPE_F32, 1, DLHOST_MEMORY_DEVICE, q);
    });
    cast[id] = x.get(r.stream);
    codes[id] |= run([&](dlhost_request** q) { return api->barrier(r.comm, q); });
    api->finalize(r.comm);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  for (int id = 0; id < 2; ++id) {
    EXPECT_EQ(codes[id], DLHOST_CODE_OK) << "rank " << id;
    EXPECT_EQ(sums[id], (std::vector<float>{1.5f, 15.0f})) << "rank " << id;
    EXPECT_EQ(gathered[id], (std::vector<float>{1.5f, 15.0f, 1.5f, 15.0f})) << "rank " << id;
    EXPECT_EQ(cast[id], (std::vector<float>{1.0f, 1.0f})) << "rank " << id;
  }
}

TEST_F(NcclGpu, ADeadPeerNeverLeavesTheSurvivorHung) {
  NEED_GPUS(2);
  std::vector<int32_t> codes(2, -1);
  std::string survivor;
  auto rank = [&](int id) {
    Rank r(id);
    r.options.values["timeout_s"] = "3";
    codes[id] = r.init(api, id, 2, "dead/");
    if (codes[id] != DLHOST_CODE_OK) return;
    if (id == 1) {  // dies: its comm goes away without taking part in anything
      ext.abort->abort(r.comm);
      api->finalize(r.comm);
      return;
    }
    DeviceArray<float> x(1024);
    dlhost_request* q = nullptr;
    codes[0] = code_of(api->all_reduce(r.comm, x.data, x.data, 1024, DLHOST_DTYPE_F32,
                                       DLHOST_REDUCE_SUM, DLHOST_MEMORY_DEVICE, &q),
                       &survivor);
    if (q != nullptr) api->request_free(q);
    if (codes[0] == DLHOST_CODE_OK)
      codes[0] = run([&](dlhost_request** b) { return api->barrier(r.comm, b); }, &survivor);
    api->finalize(r.comm);
  };
  std::thread t0(rank, 0), t1(rank, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(codes[1], DLHOST_CODE_OK);
  // Returning at all is the point; the code says who noticed first: the watchdog or a barrier
  // (ABORTED, DEADLINE_EXCEEDED) or NCCL itself (a remote or system error).
  EXPECT_NE(codes[0], DLHOST_CODE_OK) << "the survivor finished a collective with a dead peer";
  EXPECT_FALSE(survivor.empty());
  std::printf("survivor: code %d: %s\n", codes[0], survivor.c_str());
}

}  // namespace
