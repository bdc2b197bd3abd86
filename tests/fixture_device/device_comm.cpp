// device_comm.cpp — a test fixture: the comm "device_store", which works the way NCCL does for
// dlhost's host, on the fake device of fake_device.h: it accepts device memory only, needs the
// stream of the rank's model (DLHOST_EXT_COMM_STREAM, a dlhost_host_queue), and orders every
// collective on that stream. A request is complete once the collective is ordered (ABI 1.2's
// rule for stream-ordered comms); the data moves when the stream reaches it, between processes,
// through the host's rendezvous store under the comm's store_prefix. Slow (every value crosses
// TCP) but exact, which is what the device-path tests need: 2 ranks must end with the weights of
// 1 rank.
//
// Group calls (DLHOST_EXT_COMM_GROUP) are accepted; with a stream every collective is already
// ordered, so a group changes nothing here but is counted, for the tests.
#include <dlhost/dlhost.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "fake_device.h"

namespace {

namespace sdk = dlhost::sdk;
using fake_device::alias;

constexpr int64_t kWaitMs = 60000;

struct Comm {
  int32_t rank = 0, world = 1;
  std::string prefix;
  dlhost_host_queue* queue = nullptr;
  uint64_t sequence = 0;  // collectives issued; the same order on every rank
  std::string error;      // first failure on the stream; returned by the next collective
};

// Every request is complete when returned: this token stands for all of them.
dlhost_request* ordered() {
  static int token = 0;
  return reinterpret_cast<dlhost_request*>(&token);
}

std::vector<char> get(const std::string& key, size_t bytes) {
  std::vector<char> v(bytes);
  size_t size = 0;
  sdk::check(sdk::host()->store_get(key.c_str(), kWaitMs, v.data(), v.size(), &size));
  if (size != bytes) sdk::invalid("device_store: key " + key + " holds " + std::to_string(size));
  return v;
}

void put(const std::string& key, const void* data, size_t bytes) {
  sdk::check(sdk::host()->store_set(key.c_str(), data, bytes));
}

// Runs `work` on the comm's stream; a failure there is kept for the next call to report.
template <class Work>
void on_stream(Comm& c, Work work) {
  if (!c.error.empty()) sdk::fail(DLHOST_CODE_INTERNAL, "device_store: " + c.error);
  struct Task {
    Comm* comm;
    Work work;
  };
  auto* task = new Task{&c, std::move(work)};
  c.queue->enqueue(
      c.queue->self,
      [](void* arg) {
        auto* t = static_cast<Task*>(arg);
        try {
          t->work();
        } catch (const std::exception& e) {
          if (t->comm->error.empty()) t->comm->error = e.what();
        }
        delete t;
      },
      task);
}

void check_args(const void* buf, int32_t dtype, int32_t space) {
  if (space != DLHOST_MEMORY_DEVICE)
    sdk::invalid("device_store: accepts device memory only (got memory space " +
                 std::to_string(space) + ")");
  if (dtype != DLHOST_DTYPE_F32) sdk::unimplemented("device_store: F32 only");
  if (buf == nullptr) sdk::invalid("device_store: NULL buffer");
}

void all_reduce(Comm& c, const void* send, void* recv, uint64_t count, int32_t op) {
  std::string key = c.prefix + "ar/" + std::to_string(c.sequence++) + "/";
  on_stream(c, [&c, key, send, recv, count, op] {
    size_t bytes = count * 4;
    put(key + std::to_string(c.rank), alias<char>(send), bytes);
    // Every rank combines the contributions in rank order, so every rank ends with the same bits.
    std::vector<float> acc;
    for (int32_t r = 0; r < c.world; ++r) {
      std::vector<char> mine;
      const float* o = alias<float>(send);
      if (r != c.rank) {
        mine = get(key + std::to_string(r), bytes);
        o = reinterpret_cast<const float*>(mine.data());
      }
      if (r == 0) {
        acc.assign(o, o + count);
        continue;
      }
      for (uint64_t i = 0; i < count; ++i) {
        if (op == DLHOST_REDUCE_MAX)
          acc[i] = std::max(acc[i], o[i]);
        else if (op == DLHOST_REDUCE_MIN)
          acc[i] = std::min(acc[i], o[i]);
        else
          acc[i] += o[i];
      }
    }
    if (op == DLHOST_REDUCE_AVG)
      for (float& x : acc) x /= static_cast<float>(c.world);
    std::memcpy(alias<char>(recv), acc.data(), bytes);
  });
}

void broadcast(Comm& c, void* buf, uint64_t count, int32_t root) {
  std::string key = c.prefix + "bc/" + std::to_string(c.sequence++);
  on_stream(c, [&c, key, buf, count, root] {
    if (c.rank == root)
      put(key, alias<char>(buf), count * 4);
    else {
      std::vector<char> v = get(key, count * 4);
      std::memcpy(alias<char>(buf), v.data(), v.size());
    }
  });
}

void all_gather(Comm& c, const void* send, void* recv, uint64_t count) {
  std::string key = c.prefix + "ag/" + std::to_string(c.sequence++) + "/";
  on_stream(c, [&c, key, send, recv, count] {
    size_t bytes = count * 4;
    put(key + std::to_string(c.rank), alias<char>(send), bytes);
    for (int32_t r = 0; r < c.world; ++r) {
      char* dst = alias<char>(recv) + static_cast<size_t>(r) * bytes;
      if (r == c.rank)
        std::memmove(dst, alias<char>(send), bytes);
      else {
        std::vector<char> v = get(key + std::to_string(r), bytes);
        std::memcpy(dst, v.data(), bytes);
      }
    }
  });
}

Comm* init(const dlhost_comm_init_args* args) {
  const auto* ext = reinterpret_cast<const dlhost_comm_stream_ext*>(
      dlhost_find_extension(args->extensions, DLHOST_EXT_COMM_STREAM));
  if (ext == nullptr || ext->stream.kind != DLHOST_STREAM_HOST_QUEUE)
    sdk::fail(DLHOST_CODE_FAILED_PRECONDITION,
              "device_store: needs the stream of an asynchronous backend on the fake device "
              "(backend: async_device)");
  auto* c = new Comm;
  c->rank = args->rank;
  c->world = args->world_size;
  c->queue = static_cast<dlhost_host_queue*>(ext->stream.handle);
  if (DLHOST_HAS_FIELD(args, dlhost_comm_init_args, store_prefix) && args->store_prefix != nullptr)
    c->prefix = args->store_prefix;
  return c;
}

Comm& comm_of(dlhost_comm* c) { return *reinterpret_cast<Comm*>(c); }

int g_groups = 0;  // group_end calls, logged at finalize

const dlhost_comm_group_ext kGroup = [] {
  dlhost_comm_group_ext e{};
  e.struct_size = DLHOST_COMM_GROUP_EXT_STRUCT_SIZE;
  e.type = DLHOST_EXT_COMM_GROUP;
  e.group_start = [](dlhost_comm*) -> dlhost_status* { return nullptr; };
  e.group_end = [](dlhost_comm*) -> dlhost_status* {
    ++g_groups;
    return nullptr;
  };
  return e;
}();

const dlhost_comm_api kApi = [] {
  auto t = sdk::make_struct<dlhost_comm_api>(DLHOST_COMM_API_STRUCT_SIZE);
  t.capabilities = [](dlhost_comm_caps* out) {
    return sdk::guard([&] {
      out->host_memory = 0;
      out->device_memory = 1;
      out->dtypes = 1u << DLHOST_DTYPE_F32;
      out->library = "device_store fixture (rendezvous store, stream-ordered)";
    });
  };
  t.init = [](const dlhost_comm_init_args* args, dlhost_comm** out) {
    return sdk::guard([&] { *out = reinterpret_cast<dlhost_comm*>(init(args)); });
  };
  t.finalize = [](dlhost_comm* c) {
    if (c == nullptr) return;
    sdk::log(DLHOST_LOG_DEBUG, "device_store",
             "finalize after " + std::to_string(comm_of(c).sequence) + " collectives, " +
                 std::to_string(g_groups) + " groups");
    delete &comm_of(c);
  };
  t.all_reduce = [](dlhost_comm* c, const void* send, void* recv, uint64_t count, int32_t dtype,
                    int32_t op, int32_t space, dlhost_request** req) {
    return sdk::guard([&] {
      check_args(send, dtype, space);
      all_reduce(comm_of(c), send, recv, count, op);
      *req = ordered();
    });
  };
  t.broadcast = [](dlhost_comm* c, void* buf, uint64_t count, int32_t dtype, int32_t root,
                   int32_t space, dlhost_request** req) {
    return sdk::guard([&] {
      check_args(buf, dtype, space);
      broadcast(comm_of(c), buf, count, root);
      *req = ordered();
    });
  };
  t.all_gather = [](dlhost_comm* c, const void* send, void* recv, uint64_t count, int32_t dtype,
                    int32_t space, dlhost_request** req) {
    return sdk::guard([&] {
      check_args(send, dtype, space);
      all_gather(comm_of(c), send, recv, count);
      *req = ordered();
    });
  };
  t.barrier = [](dlhost_comm* c, dlhost_request** req) {
    return sdk::guard([&] {
      Comm& comm = comm_of(c);
      std::string key = comm.prefix + "barrier/" + std::to_string(comm.sequence++) + "/";
      char one = 1;
      put(key + std::to_string(comm.rank), &one, 1);
      for (int32_t r = 0; r < comm.world; ++r) get(key + std::to_string(r), 1);
      *req = ordered();
    });
  };
  t.test = [](dlhost_request*, int32_t* done) -> dlhost_status* {
    *done = 1;
    return nullptr;
  };
  t.wait = [](dlhost_request*) -> dlhost_status* { return nullptr; };
  t.request_free = [](dlhost_request*) {};
  return t;
}();

const dlhost_plugin kPlugin = [] {
  auto p = sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
  p.abi_major = DLHOST_ABI_MAJOR;
  p.abi_minor = DLHOST_ABI_MINOR;
  p.kind = DLHOST_PLUGIN_COMM;
  p.name = "device_store";
  p.version = "1.0.0";
  p.description = "test fixture: stream-ordered collectives on the fake device's memory";
  p.comm = &kApi;
  p.extensions = reinterpret_cast<const dlhost_extension*>(&kGroup);
  return p;
}();

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return dlhost::sdk::attach_host(host, "device_store") ? &kPlugin : nullptr;
}
