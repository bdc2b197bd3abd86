// test_comm_gloo.cpp — the `gloo` comm plugin in one process: loading and capabilities; a world
// of 1; a world of 2 whose ranks are two threads of this process (each its own Gloo context and
// TCP pairs over loopback, bootstrapped through the host's in-process rendezvous store), with
// every collective, reduce op and dtype checked exactly under each all-reduce algorithm
// (ring, halving_doubling, bcube); requests completing asynchronously and out of order; store
// prefixes; a peer that leaves (the other rank fails at once, never hangs) and one that stalls
// (the other rank times out); bad options and arguments refused with the right code.
// Multi-process runs (launcher: local, mpirun, comm-bench) are comm_gloo_e2e.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "core/host_api.h"
#include "core/plugin_registry.h"

namespace {

using dlhost::StatusPtr;

int32_t code_of(dlhost_status* s, std::string* message = nullptr) {
  StatusPtr owned(s);
  if (!owned) return DLHOST_CODE_OK;
  if (message != nullptr) *message = owned->message;
  return owned->code;
}

// Every test's comms get keys no other test's comms use (the in-process store outlives tests).
std::string fresh_prefix() {
  static int n = 0;
  return "test_comm_gloo/" + std::to_string(n++) + "/";
}

// Public members: the check helpers below drive collectives through the fixture.
class CommGloo : public ::testing::TestWithParam<std::string> {
 public:
  void SetUp() override {
    ASSERT_TRUE(registry.load_file(std::string(DLHOST_TEST_PLUGIN_DIR) + "/libdlhost_comm_gloo.so"))
        << (registry.refused().empty() ? "" : registry.refused().back().reason);
    plugin = registry.find(DLHOST_PLUGIN_COMM, "gloo");
    ASSERT_NE(plugin, nullptr);
    api = plugin->table->comm;
    options.values["algorithm"] = GetParam();
    options.values["timeout"] = "60";
    prefix = fresh_prefix();
  }

  dlhost_comm_init_args args_for(int32_t rank, int32_t world) const {
    dlhost_comm_init_args a{};
    a.struct_size = DLHOST_COMM_INIT_ARGS_STRUCT_SIZE;
    a.rank = rank;
    a.world_size = world;
    a.local_rank = rank;
    a.local_size = world;
    a.device = -1;
    a.options = &options;
    a.store_prefix = prefix.c_str();
    return a;
  }

  // Runs body(rank, comm) on `world` threads, one comm each, then finalizes them all: after a
  // goodbye unless `goodbye` is false (a test where a rank leaves or stalls on purpose).
  void on_ranks(int32_t world, const std::function<void(int32_t, dlhost_comm*)>& body,
                bool goodbye = true) {
    std::vector<std::thread> ranks;
    for (int32_t r = 0; r < world; ++r)
      ranks.emplace_back([&, r] {
        auto a = args_for(r, world);
        dlhost_comm* comm = nullptr;
        std::string message;
        ASSERT_EQ(code_of(api->init(&a, &comm), &message), DLHOST_CODE_OK) << message;
        body(r, comm);
        if (goodbye) say_goodbye(comm);
        api->finalize(comm);
      });
    for (auto& t : ranks) t.join();
  }

  // What the host does before it finalizes a comm at a clean end (CommSession::goodbye): a
  // barrier, its failure ignored. Gloo fails a collective whose peer closed before it saw the
  // collective complete, even with all the data in; after the barrier no rank is in one.
  void say_goodbye(dlhost_comm* c) {
    run([&](dlhost_request** r) { return api->barrier(c, r); });
  }

  // Issues, waits, frees; the wait's code.
  template <class Issue>
  int32_t run(Issue&& issue, std::string* message = nullptr) {
    dlhost_request* r = nullptr;
    int32_t code = code_of(issue(&r), message);
    if (code != DLHOST_CODE_OK) return code;
    code = code_of(api->wait(r), message);
    api->request_free(r);
    return code;
  }

  int32_t all_reduce(dlhost_comm* c, const void* s, void* d, uint64_t n, int32_t dtype, int32_t op,
                     std::string* message = nullptr) {
    return run(
        [&](dlhost_request** r) {
          return api->all_reduce(c, s, d, n, dtype, op, DLHOST_MEMORY_HOST, r);
        },
        message);
  }

  dlhost::PluginRegistry registry;
  const dlhost::LoadedPlugin* plugin = nullptr;
  const dlhost_comm_api* api = nullptr;
  dlhost_options options;
  std::string prefix;
};

// Rank r's element i: small integers, so sums are exact in every dtype (comm-bench's data).
template <class T>
T value_of(int32_t rank, size_t i) {
  return static_cast<T>(int((i + 7 * size_t(rank)) % 17) - 8);
}
template <class T>
std::vector<T> data_of(int32_t rank, size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value_of<T>(rank, i);
  return v;
}

template <class T>
T expected(int32_t op, size_t i, int32_t world) {
  T sum = 0, lo = 0, hi = 0;
  for (int32_t r = 0; r < world; ++r) {
    const T x = value_of<T>(r, i);
    sum += x;
    lo = r == 0 ? x : std::min(lo, x);
    hi = r == 0 ? x : std::max(hi, x);
  }
  if (op == DLHOST_REDUCE_MAX) return hi;
  if (op == DLHOST_REDUCE_MIN) return lo;
  return op == DLHOST_REDUCE_AVG ? static_cast<T>(sum / static_cast<T>(world)) : sum;
}

// Every reduce op, in place and not, on a size Gloo's ring cuts into several segments.
template <class T>
void check_every_op(CommGloo& t, int32_t dtype, int32_t rank, int32_t world, dlhost_comm* c) {
  const size_t n = 3001;
  for (int32_t op : {DLHOST_REDUCE_SUM, DLHOST_REDUCE_AVG, DLHOST_REDUCE_MAX, DLHOST_REDUCE_MIN}) {
    for (bool in_place : {false, true}) {
      std::vector<T> in = data_of<T>(rank, n), out(n, T(99));
      T* dst = in_place ? in.data() : out.data();
      ASSERT_EQ(t.all_reduce(c, in.data(), dst, n, dtype, op), DLHOST_CODE_OK);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(dst[i], expected<T>(op, i, world))
            << "dtype " << dtype << " op " << op << " in place " << in_place << " at " << i;
    }
  }
}

void check_all_dtypes(CommGloo& t, int32_t rank, int32_t world, dlhost_comm* c) {
  check_every_op<float>(t, DLHOST_DTYPE_F32, rank, world, c);
  check_every_op<double>(t, DLHOST_DTYPE_F64, rank, world, c);
  check_every_op<int32_t>(t, DLHOST_DTYPE_I32, rank, world, c);
  check_every_op<int64_t>(t, DLHOST_DTYPE_I64, rank, world, c);
}

// Broadcast from every root, all-gather into a fresh buffer and in place, barrier.
void check_broadcast_gather_barrier(CommGloo& t, int32_t rank, int32_t world, dlhost_comm* c) {
  for (int32_t root = 0; root < world; ++root) {
    std::vector<double> b = data_of<double>(rank, 100);
    ASSERT_EQ(t.run([&](dlhost_request** r) {
      return t.api->broadcast(c, b.data(), b.size(), DLHOST_DTYPE_F64, root, DLHOST_MEMORY_HOST, r);
    }),
              DLHOST_CODE_OK);
    EXPECT_EQ(b, data_of<double>(root, 100)) << "root " << root;
  }
  const size_t n = 33;
  std::vector<int64_t> mine = data_of<int64_t>(rank, n), all(n * size_t(world), -1);
  std::vector<int64_t> in_place = all;
  std::copy(mine.begin(), mine.end(), in_place.begin() + std::ptrdiff_t(n * size_t(rank)));
  for (auto* out : {&all, &in_place}) {
    const int64_t* send = out == &all ? mine.data() : out->data() + n * size_t(rank);
    ASSERT_EQ(t.run([&](dlhost_request** r) {
      return t.api->all_gather(c, send, out->data(), n, DLHOST_DTYPE_I64, DLHOST_MEMORY_HOST, r);
    }),
              DLHOST_CODE_OK);
    for (int32_t r = 0; r < world; ++r)
      EXPECT_TRUE(std::equal(out->begin() + std::ptrdiff_t(n * size_t(r)),
                             out->begin() + std::ptrdiff_t(n * size_t(r + 1)),
                             data_of<int64_t>(r, n).begin()))
          << "block of rank " << r;
  }
  EXPECT_EQ(t.run([&](dlhost_request** r) { return t.api->barrier(c, r); }), DLHOST_CODE_OK);
}

TEST_P(CommGloo, LoadsAsUsableCommPluginWithHonestCapabilities) {
  EXPECT_TRUE(plugin->usable) << plugin->unusable_reason;
  EXPECT_EQ(plugin->priority, 5);  // below mpi's 10
  dlhost_comm_caps caps{};
  caps.struct_size = DLHOST_COMM_CAPS_STRUCT_SIZE;
  ASSERT_EQ(code_of(api->capabilities(&caps)), DLHOST_CODE_OK);
  EXPECT_EQ(caps.host_memory, 1);
  EXPECT_EQ(caps.device_memory, 0);
  for (int32_t d : {DLHOST_DTYPE_F32, DLHOST_DTYPE_F64, DLHOST_DTYPE_I32, DLHOST_DTYPE_I64})
    EXPECT_TRUE((caps.dtypes >> d) & 1u) << d;
  EXPECT_FALSE((caps.dtypes >> DLHOST_DTYPE_F16) & 1u);
  EXPECT_EQ(std::string(caps.library).rfind("Gloo 0.", 0), 0u) << caps.library;
}

TEST_P(CommGloo, EveryCollectiveOnOneRank) {
  on_ranks(1, [&](int32_t rank, dlhost_comm* c) {
    check_all_dtypes(*this, rank, 1, c);
    check_broadcast_gather_barrier(*this, rank, 1, c);
  });
}

TEST_P(CommGloo, EveryCollectiveOnTwoRanks) {
  on_ranks(2, [&](int32_t rank, dlhost_comm* c) {
    check_all_dtypes(*this, rank, 2, c);
    check_broadcast_gather_barrier(*this, rank, 2, c);
  });
}

TEST_P(CommGloo, RequestsCompleteAsynchronouslyInIssueOrder) {
  on_ranks(2, [&](int32_t rank, dlhost_comm* c) {
    // Several buckets in flight at once, as data parallelism issues them during backward.
    const size_t n = 1 << 16;
    std::vector<std::vector<float>> buckets(4, std::vector<float>(n, float(rank + 1)));
    std::vector<dlhost_request*> pending(buckets.size(), nullptr);
    for (size_t b = 0; b < buckets.size(); ++b)
      ASSERT_EQ(
          code_of(api->all_reduce(c, buckets[b].data(), buckets[b].data(), n, DLHOST_DTYPE_F32,
                                  DLHOST_REDUCE_AVG, DLHOST_MEMORY_HOST, &pending[b])),
          DLHOST_CODE_OK);
    int32_t done = 0;
    while (!done) ASSERT_EQ(code_of(api->test(pending.back(), &done)), DLHOST_CODE_OK);
    for (size_t b = buckets.size(); b-- > 0;) {  // waited in reverse: all already complete
      ASSERT_EQ(code_of(api->test(pending[b], &done)), DLHOST_CODE_OK);
      EXPECT_EQ(done, 1) << "bucket " << b << " issued before the last one";
      ASSERT_EQ(code_of(api->wait(pending[b])), DLHOST_CODE_OK);
      api->request_free(pending[b]);
      EXPECT_EQ(buckets[b].front(), 1.5f);
      EXPECT_EQ(buckets[b].back(), 1.5f);
    }
    // A request freed before it completed is waited for: its buffer is final afterwards.
    std::vector<int32_t> x(n, rank);
    dlhost_request* r = nullptr;
    ASSERT_EQ(code_of(api->all_reduce(c, x.data(), x.data(), n, DLHOST_DTYPE_I32, DLHOST_REDUCE_SUM,
                                      DLHOST_MEMORY_HOST, &r)),
              DLHOST_CODE_OK);
    api->request_free(r);
    EXPECT_EQ(x[n - 1], 1);
  });
}

TEST_P(CommGloo, CommsWithoutPrefixOrWithTheSamePrefixNeverShareKeys) {
  // A host that sets no prefix, twice in one process, then two comms of one prefix at once.
  for (int i = 0; i < 2; ++i) {
    prefix.clear();
    std::vector<std::thread> ranks;
    for (int32_t rank = 0; rank < 2; ++rank)
      ranks.emplace_back([&, rank] {
        auto a = args_for(rank, 2);
        a.store_prefix = nullptr;
        dlhost_comm* c = nullptr;
        ASSERT_EQ(code_of(api->init(&a, &c)), DLHOST_CODE_OK);
        int64_t x = rank + 1;
        EXPECT_EQ(all_reduce(c, &x, &x, 1, DLHOST_DTYPE_I64, DLHOST_REDUCE_SUM), DLHOST_CODE_OK);
        EXPECT_EQ(x, 3);
        say_goodbye(c);
        api->finalize(c);
      });
    for (auto& t : ranks) t.join();
  }
  prefix = fresh_prefix();
  on_ranks(2, [&](int32_t rank, dlhost_comm* first) {
    auto a = args_for(rank, 2);
    dlhost_comm* second = nullptr;
    ASSERT_EQ(code_of(api->init(&a, &second)), DLHOST_CODE_OK);
    int32_t x = rank, y = 10 * rank;
    EXPECT_EQ(all_reduce(second, &y, &y, 1, DLHOST_DTYPE_I32, DLHOST_REDUCE_SUM), DLHOST_CODE_OK);
    EXPECT_EQ(all_reduce(first, &x, &x, 1, DLHOST_DTYPE_I32, DLHOST_REDUCE_SUM), DLHOST_CODE_OK);
    EXPECT_EQ(x, 1);
    EXPECT_EQ(y, 10);
    api->finalize(second);
  });
}

TEST_P(CommGloo, APeerThatLeftFailsTheCollectiveAndEveryLaterOne) {
  // Rank 1 leaves only once rank 0 has seen the first all-reduce complete: Gloo fails a
  // collective whose peer closed before it saw it complete, even with all the data in (under
  // load, 1 run in about 200 failed so with halving-doubling); a clean end says goodbye for
  // this (say_goodbye), but a peer that leaves does not.
  std::promise<void> first_done;
  std::future<void> rank0_first_done = first_done.get_future();
  on_ranks(
      2,
      [&](int32_t rank, dlhost_comm* c) {
        int32_t x = 1;
        std::string first;
        const int32_t first_code =
            all_reduce(c, &x, &x, 1, DLHOST_DTYPE_I32, DLHOST_REDUCE_SUM, &first);
        EXPECT_EQ(first_code, DLHOST_CODE_OK) << first;
        if (rank == 1) {  // leaves: on_ranks finalizes its comm, closing its connections
          EXPECT_EQ(rank0_first_done.wait_for(std::chrono::seconds(60)), std::future_status::ready);
          return;
        }
        first_done.set_value();
        if (first_code != DLHOST_CODE_OK) return;
        std::vector<float> big(1 << 20, 1.0f);
        std::string message;
        const int32_t code = all_reduce(c, big.data(), big.data(), big.size(), DLHOST_DTYPE_F32,
                                        DLHOST_REDUCE_SUM, &message);
        EXPECT_EQ(code, DLHOST_CODE_UNAVAILABLE) << message;
        EXPECT_NE(message.find("all_reduce on rank 0 failed"), std::string::npos) << message;
        EXPECT_EQ(run([&](dlhost_request** r) { return api->barrier(c, r); }, &message),
                  DLHOST_CODE_FAILED_PRECONDITION);
        EXPECT_NE(message.find("an earlier collective failed"), std::string::npos) << message;
      },
      /*goodbye=*/false);
}

TEST_P(CommGloo, APeerThatStallsTimesTheCollectiveOut) {
  options.values["timeout"] = "0.5";
  std::promise<void> gave_up;
  std::future<void> rank0_gave_up = gave_up.get_future();
  on_ranks(
      2,
      [&](int32_t rank, dlhost_comm* c) {
        if (rank == 1) {  // alive and connected, but joins nothing until rank 0 has given up
          rank0_gave_up.wait();
          return;
        }
        int32_t x = 1;
        std::string message;
        EXPECT_EQ(all_reduce(c, &x, &x, 1, DLHOST_DTYPE_I32, DLHOST_REDUCE_SUM, &message),
                  DLHOST_CODE_DEADLINE_EXCEEDED)
            << message;
        EXPECT_NE(message.find("timed out after 500 ms"), std::string::npos) << message;
        gave_up.set_value();
      },
      /*goodbye=*/false);
}

TEST_P(CommGloo, BadOptionsAndArgumentsAreRefused) {
  std::string message;
  dlhost_comm* c = nullptr;
  options.values["algorithm"] = "tree";
  auto a = args_for(0, 1);
  EXPECT_EQ(code_of(api->init(&a, &c), &message), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("'tree' is not one of ring, halving_doubling, bcube"), std::string::npos)
      << message;
  options.values["algorithm"] = GetParam();
  options.values["timeout"] = "soon";
  EXPECT_EQ(code_of(api->init(&a, &c), &message), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_NE(message.find("option timeout"), std::string::npos) << message;
  options.values["timeout"] = "60";
  a.rank = 1;
  EXPECT_EQ(code_of(api->init(&a, &c), &message), DLHOST_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(c, nullptr);

  on_ranks(1, [&](int32_t, dlhost_comm* comm) {
    float x[4] = {1, 2, 3, 4};
    dlhost_request* r = nullptr;
    auto reduce = [&](const void* s, int32_t dtype, int32_t op, int32_t space) {
      return code_of(api->all_reduce(comm, s, x, 4, dtype, op, space, &r), &message);
    };
    EXPECT_EQ(reduce(x, 99, DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST), DLHOST_CODE_INVALID_ARGUMENT);
    EXPECT_EQ(reduce(x, DLHOST_DTYPE_BF16, DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST),
              DLHOST_CODE_UNIMPLEMENTED);
    EXPECT_EQ(reduce(x, DLHOST_DTYPE_F32, 42, DLHOST_MEMORY_HOST), DLHOST_CODE_INVALID_ARGUMENT);
    EXPECT_EQ(reduce(x, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM, DLHOST_MEMORY_DEVICE),
              DLHOST_CODE_INVALID_ARGUMENT);
    EXPECT_NE(message.find("host memory only"), std::string::npos) << message;
    EXPECT_EQ(reduce(nullptr, DLHOST_DTYPE_F32, DLHOST_REDUCE_SUM, DLHOST_MEMORY_HOST),
              DLHOST_CODE_INVALID_ARGUMENT);
    EXPECT_EQ(
        code_of(api->broadcast(comm, x, 4, DLHOST_DTYPE_F32, 1, DLHOST_MEMORY_HOST, &r), &message),
        DLHOST_CODE_INVALID_ARGUMENT);
    EXPECT_NE(message.find("root 1"), std::string::npos) << message;
    EXPECT_EQ(r, nullptr);
  });
}

INSTANTIATE_TEST_SUITE_P(Algorithms, CommGloo,
                         ::testing::Values("ring", "halving_doubling", "bcube"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
