// store_comm.cpp — a test fixture: the comm plugin "store_check", which exists only to prove that
// the host's rendezvous store crosses process boundaries, and that the host gives each comm its
// own key namespace. Its init sets "<store_prefix>rank/<rank>" to its rank
// as text and reads every other rank's key (10 s each), failing init with a status that names
// the missing or wrong key. Its collectives move no data between ranks (all-reduce copies send to
// recv, requests complete at once), so a case using it runs but does not train as one.
#include <dlhost/dlhost.hpp>

#include <cstring>
#include <string>

namespace {

namespace sdk = dlhost::sdk;

struct Comm {
  int32_t rank = 0;
  int32_t world_size = 1;
  std::string prefix;  // dlhost_comm_init_args.store_prefix (ABI 1.2), "" from an older host
};

constexpr int64_t kWaitMs = 10000;

size_t dtype_bytes(int32_t dtype) {
  const size_t bytes = sdk::dtype_size(dtype);
  if (bytes == 0) sdk::invalid("store_check: unknown dtype " + std::to_string(dtype));
  return bytes;
}

// Every request is already complete; this one stands for all of them.
dlhost_request* done_request() {
  static int token = 0;
  return reinterpret_cast<dlhost_request*>(&token);
}

void check_peer(const Comm& c, int32_t peer) {
  const int32_t rank = c.rank;
  std::string key = c.prefix + "rank/" + std::to_string(peer);
  char buf[64] = {};
  size_t size = 0;
  dlhost_status* s = sdk::host()->store_get(key.c_str(), kWaitMs, buf, sizeof(buf), &size);
  if (s != nullptr) {
    auto code = static_cast<dlhost_code>(sdk::host()->status_code(s));
    std::string message = sdk::host()->status_message(s);
    sdk::host()->status_destroy(s);
    sdk::fail(code, "store_check: rank " + std::to_string(rank) + " did not get '" + key +
                        "' from the rendezvous store: " + message);
  }
  std::string got(buf, size);
  if (got != std::to_string(peer))
    sdk::fail(DLHOST_CODE_DATA_LOSS, "store_check: rank " + std::to_string(rank) + " read '" + key +
                                         "' = '" + got + "', expected '" + std::to_string(peer) +
                                         "'");
}

dlhost_status* init(const dlhost_comm_init_args* args, dlhost_comm** out) {
  return sdk::guard([&] {
    auto* c = new Comm{args->rank, args->world_size, {}};
    if (DLHOST_HAS_FIELD(args, dlhost_comm_init_args, store_prefix) && args->store_prefix)
      c->prefix = args->store_prefix;
    try {
      std::string key = c->prefix + "rank/" + std::to_string(c->rank);
      std::string value = std::to_string(c->rank);
      sdk::check(sdk::host()->store_set(key.c_str(), value.data(), value.size()));
      for (int32_t peer = 0; peer < c->world_size; ++peer)
        if (peer != c->rank) check_peer(*c, peer);
    } catch (...) {
      delete c;
      throw;
    }
    sdk::log(DLHOST_LOG_INFO, "store_check",
             "rank " + std::to_string(c->rank) + " read every rank's key through the store");
    *out = reinterpret_cast<dlhost_comm*>(c);
  });
}

const dlhost_comm_api kApi = [] {
  auto t = sdk::make_struct<dlhost_comm_api>(DLHOST_COMM_API_STRUCT_SIZE);
  t.capabilities = [](dlhost_comm_caps* out) {
    return sdk::guard([&] {
      out->host_memory = 1;
      out->device_memory = 0;
      out->dtypes = (1u << DLHOST_DTYPE_F32) | (1u << DLHOST_DTYPE_F64) | (1u << DLHOST_DTYPE_I32) |
                    (1u << DLHOST_DTYPE_I64);
      out->library = "store_check fixture";
    });
  };
  t.init = init;
  t.finalize = [](dlhost_comm* c) { delete reinterpret_cast<Comm*>(c); };
  t.all_reduce = [](dlhost_comm*, const void* send, void* recv, uint64_t count, int32_t dtype,
                    int32_t, int32_t, dlhost_request** request) {
    return sdk::guard([&] {
      if (send != recv) std::memmove(recv, send, count * dtype_bytes(dtype));
      *request = done_request();
    });
  };
  t.broadcast = [](dlhost_comm*, void*, uint64_t, int32_t, int32_t, int32_t,
                   dlhost_request** request) {
    return sdk::guard([&] { *request = done_request(); });
  };
  t.all_gather = [](dlhost_comm* c, const void* send, void* recv, uint64_t count, int32_t dtype,
                    int32_t, dlhost_request** request) {
    return sdk::guard([&] {
      size_t bytes = count * dtype_bytes(dtype);
      auto rank = static_cast<size_t>(reinterpret_cast<Comm*>(c)->rank);
      std::memmove(static_cast<char*>(recv) + rank * bytes, send, bytes);
      *request = done_request();
    });
  };
  t.barrier = [](dlhost_comm*, dlhost_request** request) {
    return sdk::guard([&] { *request = done_request(); });
  };
  t.test = [](dlhost_request*, int32_t* done) { return sdk::guard([&] { *done = 1; }); };
  t.wait = [](dlhost_request*) -> dlhost_status* { return nullptr; };
  t.request_free = [](dlhost_request*) {};
  return t;
}();

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  if (!sdk::attach_host(host, "store_check")) return nullptr;
  static const dlhost_plugin plugin = [] {
    auto p = sdk::make_struct<dlhost_plugin>(DLHOST_PLUGIN_STRUCT_SIZE);
    p.abi_major = DLHOST_ABI_MAJOR;
    p.abi_minor = DLHOST_ABI_MINOR;
    p.kind = DLHOST_PLUGIN_COMM;
    p.name = "store_check";
    p.version = "0";
    p.description = "test fixture: checks that the rendezvous store reaches every rank";
    p.backend = nullptr;
    p.comm = &kApi;
    return p;
  }();
  return &plugin;
}
